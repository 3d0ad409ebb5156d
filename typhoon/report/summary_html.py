"""The Summary that leads the HTML report, one block per kind of study, and the parts they share.

- :func:`findings_html`: a reference run's grid: the headline, the paper's claims checked
  (:mod:`typhoon.analysis.paper_claims`) and the headline table (:mod:`typhoon.analysis.output_tables`);
- :func:`schedule_findings_html`: a grid of mask schedules, each against the fixed rate;
- :func:`sequential_findings_html`: a pre-registered sequential design's verdicts and the numerics of each seed;
- every one ends on the runs table (:func:`runs_section_html`); a pipeline check whose comparisons cannot be
  tested says why (:func:`untestable_html`).

Which block a study's report leads with, its policy says (:mod:`typhoon.report.study_pages`); the page around
it is :mod:`typhoon.report.html`'s.
"""

from __future__ import annotations

import html
from pathlib import Path

from typhoon import paths
from typhoon.report.notebook_html import markdown_html


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


def findings_html(out_dir: Path) -> str:
    """The headline, the claims table and the headline table (empty when the tables are not there)."""
    # the claims read scipy: loaded when a report is built
    from typhoon.analysis import headline_table, holm_caption, paper_claims, read_tables
    from typhoon.report.results_readme import CLAIMS_CAPTION

    try:
        tables = read_tables(out_dir)
    except FileNotFoundError as err:
        return f'<div class="error">No findings: {html.escape(str(err))}</div>'
    claims = paper_claims.claims_table(tables)
    return "\n".join([
        f'<p class="headline">{html.escape(paper_claims.headline(tables))}</p>',
        '<h3 id="claims">The paper’s claims, checked</h3>',
        f"<p>{html.escape(CLAIMS_CAPTION)}</p>",
        frame_html(claims, verdicts=True),
        '<h3 id="headline-table">Dev metric per task and strategy, and the paired comparisons</h3>',
        frame_html(headline_table(tables)),
        f"<p>{html.escape(holm_caption(tables))} (this table's Holm family).</p>",
        runs_section_html(tables.results),
    ])


def sequential_findings_html(out_dir: Path) -> str:
    """A sequential study's summary: one line per task, the verdict table, the numerics by seed, the runs."""
    import pandas as pd

    from typhoon.analysis import decisive
    from typhoon.report.results_readme import (
        VERDICT_CAPTION,
        mixed_sentence,
        power_sentence,
        seed_numerics_line,
        verdict_display_table,
    )

    tables = decisive.read_outputs(out_dir)
    verdicts = tables["verdicts"]
    lines = "".join(f"<li>{html.escape(line)}.</li>" for line in decisive.verdict_counts(verdicts))
    mixed = mixed_sentence(verdicts)
    return "\n".join([
        f'<ul class="headline">{lines}</ul>',
        '<h3 id="claims">Each comparison at its last look</h3>',
        f"<p>{html.escape(VERDICT_CAPTION)} The design is in the notebook below and in <code>stats/design.csv</code>.</p>",
        frame_html(verdict_display_table(verdicts), verdicts=True),
        markdown_html(power_sentence(verdicts, tables["design"])),
        *([markdown_html(mixed)] if mixed else []),
        '<h3 id="headline-table">The numerics of each seed</h3>',
        "<p>The numerics of each seed's arms (<code>stats/seeds.csv</code>; a seed listing two, joined by +, ran "
        "its arms on both, and the verdict table flags the comparisons whose pairs that mixes): "
        f"{html.escape(seed_numerics_line(tables['seeds']))}.</p>",
        runs_section_html(pd.read_csv(out_dir / "results.csv")),
    ])


def schedule_findings_html(out_dir: Path) -> str:
    """A schedules grid's summary: the answer, each schedule against the reference schedule (the registered
    comparisons), the dev metric per strategy and schedule, the runs."""
    from typhoon.analysis import headline_table, holm_caption, read_tables, schedule_study
    from typhoon.report.results_readme import SCHEDULE_CAPTION

    table = schedule_study.read_table(out_dir)
    tables = read_tables(out_dir)
    return "\n".join([
        f'<p class="headline">{html.escape(schedule_study.headline(table))}</p>',
        f'<h3 id="claims">Each schedule against {html.escape(str(table["reference"].iloc[0]))}</h3>',
        f"<p>{html.escape(SCHEDULE_CAPTION)}</p>",
        frame_html(schedule_study.display_table(table)),
        '<h3 id="headline-table">Dev metric per task, strategy and schedule</h3>',
        frame_html(headline_table(tables)),
        f"<p>{html.escape(holm_caption(tables))} (this table's Holm family).</p>",
        runs_section_html(tables.results),
    ])


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
