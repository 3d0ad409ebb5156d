"""What every study's Summary, the part that leads the HTML report, is made of: a table as HTML
(:func:`frame_html`), the runs table they all end on (:func:`runs_section_html`), and a pipeline check's line on
why its comparisons cannot be tested (:func:`untestable_html`). Each study writes its own Summary from these (its
pages: :class:`typhoon.report.study_pages.StudyPages`); the page around it is :mod:`typhoon.report.html`'s.
"""

from __future__ import annotations

import html
from pathlib import Path

from typhoon import paths


def frame_html(frame, css_class: str = "findings", verdicts: bool = False) -> str:
    """A DataFrame as an HTML table in a scroll box (verdict cells coloured)."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for row in frame.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, row, strict=True):
            cls = f' class="verdict-{str(value).replace(" ", "-")}"' if verdicts and column == "verdict" else ""
            cells.append(f"<td{cls}>{html.escape(str(value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<div class="table-wrap"><table class="{css_class}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def untestable_html(out_dir: Path) -> str:
    """A pipeline check's line on why it tests nothing, when every paired comparison of its
    ``stats/comparisons.csv`` is "cannot be tested" (else ""): how many of its runs score the majority class
    (:func:`typhoon.analysis.run_summary.degenerate_rate`), which leaves every paired difference without spread.
    A reader of the smoke report otherwise sees only a column of "cannot be tested" and no reason."""
    import pandas as pd

    from typhoon.analysis import degenerate_rate

    comparisons, results = Path(out_dir) / "stats" / "comparisons.csv", Path(out_dir) / "results.csv"
    if not (comparisons.is_file() and results.is_file()):
        return ""
    verdicts = pd.read_csv(comparisons).get("verdict", pd.Series(dtype=str))
    if verdicts.empty or not (verdicts == "cannot be tested").all():
        return ""
    degenerate = degenerate_rate(pd.read_csv(results))
    at_majority, runs = int(degenerate["n_degenerate"].sum()), int(degenerate["n"].sum())
    why = (f"{at_majority} of its {runs} runs score the majority class (the dev metric of always answering the "
           "commonest label), so the paired differences between strategies have no spread"
           if at_majority else "the paired differences between strategies have no spread")
    return (f'<p class="banner">Why every paired comparison here reads “cannot be tested” ({len(verdicts)} of '
            f"{len(verdicts)}): {html.escape(why)}, and a t test, its interval and TOST are undefined without one. "
            "A pipeline check shows that the statistics run end to end; a comparison that can be tested needs a "
            "model that learns (the cpu profile, results/cpu).</p>")


def runs_section_html(results) -> str:
    """The summary's last part, the same in every kind of folder: its heading and :func:`runs_html`."""
    return "\n".join(['<h3 id="runs">The runs</h3>',
                      "<p>Each run's record is in <code>runs/</code>; the walkthrough of its backbone × task (every "
                      "strategy and seed of the pair) is linked.</p>",
                      runs_html(results)])


def runs_html(results) -> str:
    """One row per run of ``results.csv``: its outcome, numerics and time, linked to the executed walkthrough of
    its backbone × task; the strategy column names its arm (strategy+schedule unless the default schedule, as in
    the statistics)."""
    from typhoon.analysis import arms

    results = arms(results)
    rows = []
    for r in results.itertuples():
        value = f"{r.primary_metric} {r.primary_value:.4f}" if r.status == "ok" else html.escape(str(r.error))
        link = f'<a href="notebooks/{html.escape(paths.pair_notebook(str(r.task), str(r.backbone)))}">walkthrough</a>'
        wall = f"{r.wall_s / 60:.1f} min" if r.wall_s == r.wall_s else "—"  # NaN for a failed run
        cells = [r.task, r.backbone, r.strategy, r.seed, r.status, value, getattr(r, "precision", ""), wall]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + f"<td>{link}</td></tr>")
    head = "".join(f"<th>{c}</th>" for c in ("task", "backbone", "strategy", "seed", "status", "dev metric",
                                            "precision", "wall time", ""))
    return (f'<div class="table-wrap"><table class="findings"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')
