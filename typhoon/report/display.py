"""How a notebook shows a table to a reader: a few rows, readable numbers, and where the whole table is;
and a figure with its caption as alt text (:func:`show_figure`).

A raw DataFrame in an executed notebook reads badly: hundreds of rows, probabilities in scientific
notation, counts as ``16.0`` because a missing value made the column float. :func:`show_frame` gives a
styled view instead (the report renders it as an HTML table); the full table stays in ``stats/``.
"""

from __future__ import annotations

import base64
import html
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

MAX_ROWS = 12
DIGITS = 4  # significant digits of a float that is not a whole number


def _is_whole(series: pd.Series) -> bool:
    values = pd.to_numeric(series, errors="coerce").dropna().to_numpy(float)
    return values.size > 0 and bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)))


def number_format(value, whole: bool, digits: int = DIGITS) -> str:
    """One cell as text: "—" for a missing value, an integer for a whole-number column, else ``digits``
    significant digits (scientific notation only below 1e-3 or from 1e6 on)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if whole:
        return f"{int(round(float(value))):,}"
    magnitude = abs(float(value))
    if magnitude and (magnitude < 1e-3 or magnitude >= 1e6):
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}" if magnitude >= 1 else f"{value:.{digits}f}".rstrip("0").rstrip(".") or "0"


def show_frame(frame: pd.DataFrame, *, max_rows: int = MAX_ROWS, columns: list[str] | None = None,
               saved_as: str | None = None, digits: int = DIGITS):
    """A styled view of ``frame`` for a notebook: at most ``max_rows`` rows (the first ones), only
    ``columns`` when given, whole-number columns as integers, other numbers to ``digits`` significant
    digits, and a caption saying how much is shown and where the whole table is (``saved_as``)."""
    view = frame[columns] if columns else frame
    shown = view.head(max_rows)
    whole = {c: _is_whole(view[c]) for c in view.columns if pd.api.types.is_numeric_dtype(view[c])}
    caption = f"{len(shown)} of {len(view)} rows" if len(view) > len(shown) else f"{len(view)} rows"
    if columns and len(columns) < frame.shape[1]:
        caption += f", {len(columns)} of {frame.shape[1]} columns"
    if saved_as:
        caption += f"; the whole table: {saved_as}"
    formats = {c: (lambda v, w=w: number_format(v, w, digits)) for c, w in whole.items()}
    return shown.style.format(formats, na_rep="—").hide(axis="index").set_caption(caption)


def figure_html(png: bytes) -> str:
    """A saved figure's PNG as an ``<img>`` whose alt text is its caption (:func:`typhoon.figure_style.save_figure`
    stores it in the PNG). HTML, not an image output: nbconvert's HTML leaves an image output's alt out."""
    from typhoon.report.notebook_html import NO_CAPTION, image_caption

    alt = html.escape(image_caption(png) or NO_CAPTION, quote=True)
    return f'<img class="typhoon-figure" alt="{alt}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def show_figure(saved: list[Path] | str | os.PathLike) -> None:
    """Show a figure in a notebook from what ``save_figure`` returned (its PNG first) or its PNG's path."""
    from IPython.display import HTML, display

    png = Path(saved[0] if isinstance(saved, list | tuple) else saved)
    display(HTML(figure_html(png.read_bytes())))
