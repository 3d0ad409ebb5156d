"""The one style of every figure of the bundle, and writing a figure (PNG + SVG with its caption).

:data:`STYLE` is applied by :func:`styled` while a figure is made and saved, so nothing leaks into the
caller's matplotlib settings: figures are at most :data:`MAX_WIDTH_IN` wide, so that at :data:`DPI` they
show at full size in the report's column, and no text is smaller than :data:`MIN_FONT_PT` (about 15 px
there). Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas (:func:`new_figure`) -- no
pyplot state. Each figure carries a caption (:func:`save_figure` stores it in the PNG's ``Description`` and
the SVG's metadata) that the report shows under it and as its alt text. The results figures are
:mod:`typhoon.report.figures`; the analysis stage draws its own figures (notebook 40's, the decisive looks,
a reproduction against its reference) with the same helpers.
"""

from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import matplotlib
import numpy as np  # noqa: E402
from cycler import cycler  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from typhoon.atomic import atomic_write_bytes

# Scripts and tests: the non-interactive Agg backend. A notebook kernel (MPLBACKEND set by ipykernel) or
# a session that already imported pyplot keeps its backend; figures here never use pyplot anyway.
if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")

# seaborn's "colorblind" palette (seaborn.palettes.SEABORN_PALETTES), spelled out: importing seaborn for its
# ten colours took about 0.8 s of each cell kernel's imports (python -X importtime).
COLORBLIND = tuple(to_rgb(hex_colour) for hex_colour in (
    "#0173B2", "#DE8F05", "#029E73", "#D55E00", "#CC78BC", "#CA9161", "#FBAFE4", "#949494", "#ECE133", "#56B4E9"))


def colorblind(n: int) -> list[tuple[float, float, float]]:
    """The first ``n`` colours of :data:`COLORBLIND`, cycling past ten (as ``seaborn.color_palette`` does)."""
    return [COLORBLIND[i % len(COLORBLIND)] for i in range(n)]


DPI = 150
MAX_WIDTH_IN = 7.3  # 1095 px at DPI: the report's column (typhoon.report.html.REPORT_WIDTH_PX) shows it unscaled
MIN_FONT_PT = 7.5  # about 15 px at DPI, full size
STYLE = {
    "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "legend.fontsize": 8.5, "figure.titlesize": 11, "legend.frameon": False,
    "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.color": "0.92",
    "grid.linewidth": 0.6, "axes.axisbelow": True, "lines.linewidth": 1.4, "lines.markersize": 4,
    "axes.formatter.useoffset": False,  # "+1.031e1" offsets hide the values a reader wants
    "axes.prop_cycle": cycler(color=COLORBLIND), "savefig.dpi": DPI,
}


def styled(plot):
    """Make and save a figure in :data:`STYLE` (the caller's matplotlib settings are left as they were)."""
    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper


def new_figure(width: float, height: float) -> Figure:
    """A constrained-layout figure, at most :data:`MAX_WIDTH_IN` wide (wider requests are narrowed)."""
    fig = Figure(figsize=(min(width, MAX_WIDTH_IN), height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, out_path: str | os.PathLike, caption: str = "", dpi: int = DPI) -> list[Path]:
    """Write ``fig`` as ``<out_path>.png`` and ``<out_path>.svg`` (atomically) and return both paths.

    ``caption`` (what the figure shows, one or two sentences) goes into the files' metadata: the report
    shows it under the figure and as its alt text.
    """
    base = Path(out_path)
    if base.suffix.lower() in (".png", ".svg", ".pdf"):
        base = base.with_suffix("")
    base.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    metadata = {"png": {"Description": caption}, "svg": {"Description": caption, "Date": None}}
    for ext in ("png", "svg"):
        final = base.parent / f"{base.name}.{ext}"
        # drawn in memory, then written whole (atomic_write_bytes): a process killed while it draws -- the
        # slow part -- leaves no temp file. A fixed salt: the SVG's clip-path ids are otherwise random, and
        # a regenerated figure churns in git
        drawn = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": "typhoon"}):
            fig.savefig(drawn, format=ext, dpi=dpi, metadata=metadata[ext])
        atomic_write_bytes(final, drawn.getvalue())
        paths.append(final)
    return paths


def legend_handles(axes) -> dict:
    """``{label: handle}`` over all ``axes``, each label once (for one legend serving several panels)."""
    handles = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    return handles


def shared_legend(fig: Figure, axes, ncols: int | None = None) -> None:
    """One legend for all panels, below them (the handles of every panel, each label once)."""
    handles = legend_handles(axes)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=ncols or min(len(handles), 4))


def strategy_palette(strategies: Iterable[str]) -> dict[str, tuple]:
    """A stable colour per strategy (sorted names -> colorblind palette), shared by all figures."""
    names = sorted(dict.fromkeys(str(s) for s in strategies))
    return dict(zip(names, colorblind(len(names)), strict=True))
