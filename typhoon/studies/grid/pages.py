"""The grid study's pages (:class:`typhoon.report.StudyPages`): a reference run's Summary (the headline, the
paper's claims checked against its tables, :mod:`typhoon.analysis.paper_claims`, and the headline table) and its
Results block on the results page."""

from __future__ import annotations

import html
import os
from pathlib import Path

from typhoon import paths
from typhoon.analysis import (
    NULL_POWER_DZ,
    POWER_TARGET,
    headline_table,
    holm_caption,
    markdown_table,
    paper_claims,
    read_tables,
)
from typhoon.records import read_manifest, results_numerics
from typhoon.report import StudyPages, frame_html, provenance_line, runs_section_html, shown_folder

README_BEGIN = "<!-- results:begin -->"


README_END = "<!-- results:end -->"


# Under the claims table, in the README block and in the report.
CLAIMS_CAPTION = ("Each claim is judged on the runs it is about, by its criterion (stated before the data): reproduced "
                  "when the 95 % interval lies inside the criterion, contradicted when it lies outside, not decided when "
                  "it straddles. A claim that no test is significant, where none is, is only “consistent at low power” "
                  f"when a paired t-test at these seeds had a power below {POWER_TARGET:g} against a medium "
                  f"effect (dz {NULL_POWER_DZ:g}, α 0.05): such an outcome was likely whatever the truth.")


def results_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's Results block for the reference run in ``out_dir``; links are relative to
    ``link_base`` (the folder of the README, default the repository)."""
    tables = read_tables(out_dir)
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(tables.out_dir, base)).as_posix()  # links: from the page's folder
    shown = shown_folder(tables.out_dir, rel)  # names: from the repository root, as a reader types them
    manifest = read_manifest(tables.out_dir) or {}
    lines = [f"Reference run of the `{tables.profile}` profile (`{shown}/`): "
             + provenance_line(manifest, tables) + ".", "", f"**{paper_claims.headline(tables)}**", ""]
    mix = results_numerics(tables.results) if "precision" in tables.results else {}
    if len(mix) > 1:
        lines += [f"**Mixed numerics**: {', '.join(f'{k} ({v} runs)' for k, v in sorted(mix.items()))}.", ""]
    lines += [markdown_table(headline_table(tables)), "",
              f"Paired differences are {tables.reference} minus the strategy, by seed; TOST tests equivalence "
              f"within the margin; {holm_caption(tables)} (this table's family).", ""]
    figure = tables.out_dir / "figures" / "paired_differences.png"
    if figure.is_file():
        lines += [f"![Paired differences with 95 % CIs and the equivalence margin]({rel}/figures/paired_differences.png)",
                  ""]
    lines += ["**The paper's claims, checked against this run's tables** (`typhoon.analysis.paper_claims.claims_table`):", "",
              CLAIMS_CAPTION, "",
              markdown_table(paper_claims.claims_table(tables)), "",
              f"The full report: [`{shown}/report.html`]({rel}/report.html); the executed notebooks: "
              f"[`{shown}/notebooks/`]({rel}/notebooks/); the tables: [`{shown}/stats/`]({rel}/stats/)."]
    return "\n".join(lines)


def findings_html(out_dir: Path) -> str:
    """The headline, the claims table and the headline table (empty when the tables are not there)."""
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


#: The grid study's pages: its report's Summary and its own block of the results page per folder.
PAGES = StudyPages(("The paper’s claims", "Headline table"), findings_html, (README_BEGIN, README_END), "results",
                   results_markdown)
