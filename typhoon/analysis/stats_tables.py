"""The statistics as tables a reader sees: the comparison table rounded for display, and writing tables
as CSV, Markdown and LaTeX."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon.analysis.run_summary import require_columns
from typhoon.atomic import atomic_write_text


def comparison_table(comparisons: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """The comparisons from :func:`paired_comparisons` as a compact table to show (notebook 20).

    One row per comparison, what decides first -- which pair, the verdict, the difference with its t CI, Holm p,
    TOST p -- then n, the bootstrap CI and ASO epsilon_min both ways; numbers rounded to ``digits`` decimals,
    intervals as "[low, high]" text ("--" where undefined). Long text (the Holm family, notes) is
    :func:`comparison_notes`', under the table. The full table stays the one to write and compute from.
    """
    require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "n", "mean_diff",
                                  "ci_low", "ci_high", "boot_ci_low", "boot_ci_high", "p_holm", "tost_p",
                                  "aso_eps_ab", "aso_eps_ba", "verdict"], what="comparisons")
    level = f"{100 * comparisons.attrs.get('confidence', 0.95):g}%"
    method = comparisons.attrs.get("bootstrap_method", "bootstrap")

    def interval(lows: pd.Series, highs: pd.Series) -> list[str]:
        return [f"[{lo:.{digits}f}, {hi:.{digits}f}]" if np.isfinite(lo) and np.isfinite(hi) else "--"
                for lo, hi in zip(lows.astype(float), highs.astype(float), strict=True)]

    c = comparisons
    return pd.DataFrame({
        "task": c["task"], "backbone": c["backbone"], "a": c["strategy_a"], "b": c["strategy_b"],
        "verdict": c["verdict"], "a - b": c["mean_diff"].astype(float).round(digits),
        f"{level} t CI": interval(c["ci_low"], c["ci_high"]),
        "Holm p": c["p_holm"].astype(float).round(digits), "TOST p": c["tost_p"].astype(float).round(digits),
        "n": c["n"], f"{level} {method} CI": interval(c["boot_ci_low"], c["boot_ci_high"]),
        "ASO eps a>b": c["aso_eps_ab"].astype(float).round(3),
        "ASO eps b>a": c["aso_eps_ba"].astype(float).round(3),
    }).reset_index(drop=True)


def comparison_notes(comparisons: pd.DataFrame) -> list[str]:
    """The comparisons' long text, each line once, to read under :func:`comparison_table`: which comparisons
    each Holm correction spans, and the notes of single rows (named by their pair)."""
    c = comparisons
    lines = list(dict.fromkeys(c["holm_family"].dropna().astype(str))) if "holm_family" in c else []
    for row in c[c["note"].fillna("").astype(str) != ""].itertuples() if "note" in c else []:
        lines.append(f"{row.task} {row.backbone}, {row.strategy_a} - {row.strategy_b}: {row.note}")
    return lines


# --------------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------------
def _to_markdown(df: pd.DataFrame) -> str:
    try:
        return df.to_markdown(index=False, floatfmt=".4g") + "\n"
    except ImportError:  # tabulate missing: minimal pipe table
        def fmt(x):
            return f"{x:.4g}" if isinstance(x, float) else str(x)
        head = "| " + " | ".join(map(str, df.columns)) + " |"
        sep = "|" + "|".join("---" for _ in df.columns) + "|"
        body = ["| " + " | ".join(fmt(x) for x in row) + " |" for row in df.itertuples(index=False)]
        return "\n".join([head, sep, *body]) + "\n"


def _to_latex(df: pd.DataFrame) -> str:
    return df.to_latex(index=False, float_format="%.4g", na_rep="--", escape=True)


def write_tables(tables: Mapping[str, pd.DataFrame], out_dir: str | os.PathLike) -> dict[str, list[Path]]:
    """Write each table as ``<name>.csv``, ``<name>.md`` and ``<name>.tex`` under ``out_dir``.

    Each file is written to a temporary file in the same directory and then ``os.replace``-d, so
    readers never see a half-written table. Returns ``{name: [csv, md, tex]}``.
    """
    out_dir = Path(out_dir)
    written: dict[str, list[Path]] = {}
    for name, df in tables.items():
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"table {name!r} is not a DataFrame ({type(df).__name__})")
        if not name or os.sep in name or name.startswith("."):
            raise ValueError(f"bad table name {name!r}")
        paths = [out_dir / f"{name}.csv", out_dir / f"{name}.md", out_dir / f"{name}.tex"]
        atomic_write_text(paths[0], df.to_csv(index=False))
        atomic_write_text(paths[1], _to_markdown(df))
        atomic_write_text(paths[2], _to_latex(df))
        written[name] = paths
    return written


def written_sentence(written: Mapping[str, list[Path]], folder: str = "stats/") -> str:
    """What :func:`write_tables` wrote, as a sentence for a reader (Markdown): each table's name once, with
    the formats it was written in, e.g. "Written to `stats/`: `summary`, `comparisons` (each as .csv, .md
    and .tex)." -- a notebook shows this, never the Python list of file names."""
    if not written:
        return f"No tables written to `{folder}`."
    suffixes = sorted({path.suffix for paths in written.values() for path in paths}, key=[".csv", ".md", ".tex"].index)
    formats = ", ".join(suffixes[:-1]) + f" and {suffixes[-1]}" if len(suffixes) > 1 else suffixes[0]
    names = ", ".join(f"`{name}`" for name in written)
    return f"Written to `{folder}`: {names} (each as {formats})."


def markdown_table(frame: pd.DataFrame) -> str:
    """A pipe table (``|`` in cells escaped)."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in frame.columns) + " |",
             "|" + "|".join("---" for _ in frame.columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
