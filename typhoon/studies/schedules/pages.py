"""The schedules study's pages (:class:`typhoon.report.StudyPages`): a grid of mask schedules, each schedule
against the fixed rate (:mod:`typhoon.studies.schedules.analysis`), as its report's Summary and its block of the
results page."""

from __future__ import annotations

import html
import os
from pathlib import Path

from typhoon import paths
from typhoon.analysis import headline_table, holm_caption, markdown_table, read_tables
from typhoon.records import read_manifest
from typhoon.report import StudyPages, frame_html, provenance_line, runs_section_html, shown_folder
from typhoon.studies.schedules import analysis

# The schedules grid's block (issue: does full-mask mass in the MLM phase change the fine-tuned model?).
SCHEDULES_BEGIN = "<!-- schedules:begin -->"


SCHEDULES_END = "<!-- schedules:end -->"


# Under the schedules table, in the README block and in the report.
SCHEDULE_CAPTION = ("Each schedule minus the same strategy under fixed 15 % masking, paired by seed. The dev metric is "
                    "“equivalent” when TOST at the registered margin gives p < 0.05, “different” when the paired t "
                    "(Holm over the table) does and TOST does not, else inconclusive; the seeds column is what 80 % "
                    "power at the margin would need from the measured spread. The full-mask loss is the masked LM's "
                    "dev loss with every maskable token masked, at the end of the MLM phase; the theory predicts it "
                    "lower under both schedules, and “agrees” needs its paired t p, Holm-adjusted over the table like the "
                    "dev metric, below 0.05 with the difference below 0; the last column is the verdict an unadjusted "
                    "95 % interval would give, shown for comparison only.")


def schedules_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's block for a schedules grid (``reproduce --profile schedules``): the answer
    (:func:`typhoon.studies.schedules.analysis.headline`), the comparison table, the provenance line, the figure."""
    out_dir = Path(out_dir)
    table = analysis.read_table(out_dir)
    tables = read_tables(out_dir)
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(out_dir.resolve(), base)).as_posix()  # links: from the page's folder
    shown = shown_folder(out_dir, rel)  # names: from the repository root, as a reader types them
    manifest = read_manifest(out_dir) or {}
    lines = [f"**Mask schedules, downstream** (`{shown}/`, notebook 40 section (d), [report]({rel}/report.html)): "
             + provenance_line(manifest, tables) + ".", "", f"**{analysis.headline(table)}**", "",
             markdown_table(analysis.display_table(table)), "", SCHEDULE_CAPTION]
    figure = out_dir / "figures" / "schedules_vs_fixed.png"
    if figure.is_file():
        lines += ["", f"![Each schedule against fixed: dev metric and full-mask MLM loss]({rel}/figures/schedules_vs_fixed.png)"]
    return "\n".join(lines)


def schedule_findings_html(out_dir: Path) -> str:
    """A schedules grid's summary: the answer, each schedule against the reference schedule (the registered
    comparisons), the dev metric per strategy and schedule, the runs."""
    table = analysis.read_table(out_dir)
    tables = read_tables(out_dir)
    return "\n".join([
        f'<p class="headline">{html.escape(analysis.headline(table))}</p>',
        f'<h3 id="claims">Each schedule against {html.escape(str(table["reference"].iloc[0]))}</h3>',
        f"<p>{html.escape(SCHEDULE_CAPTION)}</p>",
        frame_html(analysis.display_table(table)),
        '<h3 id="headline-table">Dev metric per task, strategy and schedule</h3>',
        frame_html(headline_table(tables)),
        f"<p>{html.escape(holm_caption(tables))} (this table's Holm family).</p>",
        runs_section_html(tables.results),
    ])


#: The schedules study's pages: its report's Summary and its one block of the results page.
PAGES = StudyPages(("Schedules against fixed", "Headline table"), schedule_findings_html, (SCHEDULES_BEGIN, SCHEDULES_END),
                   None, schedules_markdown)
