"""The HTML report of one output folder: a page a reader can read offline, without the code.

``render_report(out_dir, notebooks, profile)`` writes ``<out_dir>/report.html``: a header (the profile,
date, commit, machine, numerics, wall time), the headline and what it means, the paper's claims checked
against the tables (:mod:`typhoon.analysis.paper_claims`) and the headline table
(:mod:`typhoon.analysis.output_tables`), a table of contents, then one
section per executed notebook -- its prose and outputs, never its code, parameters, stderr or progress
bars. Math is converted to MathML (rendered by the browser, no CDN); figures carry their caption as alt
text and below the image (:func:`typhoon.figure_style.save_figure` stores it in the PNG); wide tables scroll
inside their own box; this machine's absolute paths are made relative (:func:`typhoon.paths.redact`).
Each profile has its own output folder, so one profile's report never overwrites another's.
A pipeline-check profile (smoke) says so at the top and in every section.
"""

from __future__ import annotations

import base64
import html
import io
import re
from datetime import UTC, datetime
from pathlib import Path

from typhoon import paths
from typhoon.atomic import atomic_write_text
from typhoon.machine import machine_line
from typhoon.records import invocations, now, read_manifest, trained_at_line

REPORT_WIDTH_PX = 1100  # the content column; figures are made to be read at this width (typhoon.report.figures)
_CODE_SPANS = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![\w$])", re.S)
_PLACEHOLDER = "TYPHOONMATH{}X"
NO_CAPTION = "A figure without a stored caption."
FIGURE_HTML = re.compile(r'<img class="typhoon-figure" alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')
# The names typhoon.paths.redact puts for this machine's folders look like tags: in HTML they must be escaped
# (a browser swallows "<site-packages>/x" as an unknown element); committed notebooks carry them raw.
REDACTED_NAMES = ("<site-packages>", "<python>")  # what a figure not made by typhoon.figure_style.save_figure gets

STYLE = f"""
body {{ font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f; margin: 0;
       background: #fafafa; }}
main {{ max-width: {REPORT_WIDTH_PX}px; margin: 0 auto; padding: 1.5rem 2rem 4rem; background: #fff; }}
h1 {{ font-size: 1.8rem; margin: 0.4rem 0 1rem; }} h2 {{ font-size: 1.45rem; margin-top: 2.6rem;
  border-bottom: 1px solid #ddd; padding-bottom: .2rem; }} h3 {{ font-size: 1.15rem; margin-top: 1.8rem; }}
h4 {{ font-size: 1rem; }}
dl.meta {{ display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; font-size: .92rem; }}
dl.meta dt {{ font-weight: 600; color: #555; }} dl.meta dd {{ margin: 0; overflow-wrap: anywhere; }}
.banner {{ border-left: 6px solid #d55e00; background: #fff4ec; padding: .7rem 1rem; margin: 1rem 0; }}
.banner.mixed {{ border-color: #cc79a7; background: #fbf0f6; }}
.headline {{ font-size: 1.05rem; background: #f1f6fb; border-left: 6px solid #0072b2; padding: .7rem 1rem; }}
.table-wrap {{ overflow-x: auto; max-width: 100%; margin: .6rem 0 1rem; }}
table {{ border-collapse: collapse; font-size: .82rem; font-variant-numeric: tabular-nums; }}
th, td {{ border: 1px solid #ddd; padding: .25rem .5rem; text-align: right; vertical-align: top; }}
th {{ background: #f3f3f3; }} td:first-child, th:first-child {{ text-align: left; }}
table.findings td, table.findings th {{ text-align: left; }}
td.verdict-reproduced, td.verdict-equivalent {{ background: #e8f5e9; }}
td.verdict-not-reproduced, td.verdict-contradicted {{ background: #fdecea; }}
td.verdict-not-decided, td.verdict-continue, td.verdict-undecided-at-cap, td.verdict-consistent-at-low-power {{
  background: #fff8e1; }}
td.verdict-not-comparable {{ background: #f3f3f3; }} td.verdict-different {{ background: #e3f2fd; }}
figure {{ margin: 1rem 0 1.5rem; }} figure img {{ max-width: 100%; height: auto; display: block; }}
figcaption {{ font-size: .88rem; color: #444; margin-top: .3rem; }}
pre {{ background: #f6f6f6; padding: .5rem .7rem; overflow-x: auto; font-size: .82rem; }}
code {{ font-size: .9em; background: #f3f3f3; padding: 0 .2em; }}
math[display="block"] {{ overflow-x: auto; max-width: 100%; }}
nav.toc ol {{ padding-left: 1.3rem; }} nav.toc li {{ margin: .1rem 0; }}
.error {{ border-left: 6px solid #b00020; background: #fdecea; padding: .5rem 1rem; }}
.rendered-html {{ overflow-x: auto; }}
/* a notebook's table keeps each cell on one line and scrolls in its box: squeezed into the column, a wide
   table wraps every cell, and its rows grow several lines tall and mostly blank (browser.check_page) */
.rendered-html td, .rendered-html th {{ white-space: nowrap; }}
"""


# --------------------------------------------------------------------------------------------------
# Markdown and math


def redact_html(text: str, base: Path | None = None) -> str:
    """HTML (or Markdown) with this machine's paths made relative and the names that stand for them
    (:data:`REDACTED_NAMES`) escaped, so they show as text."""
    text = paths.redact(text, base)
    for name in REDACTED_NAMES:
        text = text.replace(name, html.escape(name))
    return text


def latex_to_mathml(latex: str, block: bool) -> str:
    """LaTeX as MathML (rendered natively by browsers, offline); on a conversion error, the source in code."""
    import latex2mathml.converter

    try:
        return latex2mathml.converter.convert(latex.strip(), display="block" if block else "inline")
    except Exception:  # an expression the converter does not know: show it as code, never as raw $...$
        return f"<code>{html.escape(latex)}</code>"


def markdown_html(text: str, shift: int = 0) -> str:
    """Markdown (with ``$...$`` / ``$$...$$`` math outside code) as HTML; headings moved down ``shift`` levels."""
    import mistune

    maths: list[str] = []

    def stash(match: re.Match) -> str:
        block = match.group(1) is not None
        maths.append(latex_to_mathml(match.group(1) if block else match.group(2), block))
        return _PLACEHOLDER.format(len(maths) - 1)

    parts = _CODE_SPANS.split(text)
    text = "".join(part if i % 2 else _MATH.sub(stash, part) for i, part in enumerate(parts))
    out = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(text)
    for i, mathml in enumerate(maths):
        out = out.replace(_PLACEHOLDER.format(i), mathml)
    if shift:
        out = re.sub(r"<(/?)h([1-6])\b", lambda m: f"<{m.group(1)}h{min(6, int(m.group(2)) + shift)}", out)
    return re.sub(r"<table>", '<div class="table-wrap"><table>', out).replace("</table>", "</table></div>")


# --------------------------------------------------------------------------------------------------
# Notebook outputs


def image_caption(png: bytes) -> str | None:
    """The caption stored in a PNG's ``Description`` text chunk (``typhoon.figure_style.save_figure``)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(png)) as img:
            return img.text.get("Description") or img.text.get("Title")
    except Exception:
        return None


def output_html(output: dict, base: Path) -> str:
    """One notebook output as report HTML; "" for what a reader should not see (stderr, progress, widgets)."""
    kind = output.get("output_type")
    if kind == "stream":
        if output.get("name") != "stdout":
            return ""
        text = paths.redact(_text(output.get("text", "")), base).strip()
        return f"<pre>{html.escape(text)}</pre>" if text else ""
    if kind == "error":
        return (f'<div class="error">This cell failed: <b>{html.escape(output.get("ename", ""))}</b>: '
                f'{html.escape(paths.redact(output.get("evalue", ""), base))}</div>')
    data = output.get("data", {})
    if "application/vnd.jupyter.widget-view+json" in data:  # a widget: nothing a static page can show
        return ""
    shown_figure = FIGURE_HTML.fullmatch(_text(data.get("text/html", "")).strip())  # report.display.show_figure
    if "image/png" in data or shown_figure:
        encoded = _text(data["image/png"]).strip() if "image/png" in data else shown_figure[1]
        caption = image_caption(base64.b64decode(encoded)) or NO_CAPTION
        return (f'<figure><img src="data:image/png;base64,{encoded}" '
                f'alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}</figcaption></figure>')
    if "text/html" in data:
        body = redact_html(_text(data["text/html"]), base)
        return f'<div class="table-wrap rendered-html">{body}</div>'
    if "text/markdown" in data:
        return markdown_html(redact_html(_text(data["text/markdown"]), base), shift=2)
    if "text/plain" in data:
        text = paths.redact(_text(data["text/plain"]), base)
        return f"<pre>{html.escape(text)}</pre>" if text.strip() else ""
    return ""


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def notebook_section(path: Path, anchor: str, base: Path, banner: str = "") -> tuple[str, list[tuple[str, str]], str]:
    """An executed notebook as a report section: (its title, its [(anchor, subtitle)], its HTML).

    Markdown cells and code outputs in order; code, the parameters cells and the first heading (which
    becomes the section title) are left out.
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)
    title, parts, subsections = path.stem, [], []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "markdown":
            source = cell.source
            if title == path.stem and source.lstrip().startswith("# "):
                first, _, source = source.lstrip().partition("\n")
                title = first[2:].strip()
            rendered = markdown_html(redact_html(source, base), shift=1)
            parts.append(_anchored(rendered, anchor, subsections))
        elif cell.cell_type == "code" and not {"parameters", "injected-parameters"} & set(tags):
            parts.extend(output_html(o, base) for o in cell.get("outputs", []))
    head = f'<h2 id="{anchor}">{html.escape(title)}</h2>\n<p class="source">From <code>notebooks/{html.escape(path.name)}</code>.</p>'
    return title, subsections, "\n".join([head, banner, *filter(None, parts)])


def _anchored(rendered: str, prefix: str, subsections: list[tuple[str, str]]) -> str:
    """Give the section's h3 headings ids (for the table of contents) and list them in ``subsections``."""
    def name(match: re.Match) -> str:
        anchor = f"{prefix}-{len(subsections) + 1}"
        subsections.append((anchor, re.sub(r"<[^>]+>", "", match.group(1))))
        return f'<h3 id="{anchor}">{match.group(1)}</h3>'

    return re.sub(r"<h3>(.*?)</h3>", name, rendered, flags=re.S)


# --------------------------------------------------------------------------------------------------
# The page


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


def header_html(out_dir: Path, profile: str | None) -> tuple[str, str, bool]:
    """The title, the header block and whether the profile is a pipeline check."""
    from typhoon.profiles import load_profiles

    manifest = read_manifest(out_dir) or {}
    profile = profile or manifest.get("profile") or "unknown"
    spec = load_profiles().get(profile)
    pipeline_check = bool(spec and spec.pipeline_check)
    title = f"Which tokens to mask? Typhoon reproduction — profile “{profile}”"
    machine = machine_line(manifest["machine"]) if manifest.get("machine") else "not recorded"
    commit = manifest.get("commit") or "not recorded"
    if manifest.get("dirty"):
        commit += " (with local changes)"
    items = [("Profile", f"{profile}: {spec.description}" if spec else profile),
             ("Model", _models_line(out_dir)),
             ("Date", (manifest.get("finished") or now()).replace("T", " ")),
             ("Commit", commit), ("Trained at", trained_at_line(out_dir, manifest)), ("Machine", machine),
             ("Numerics", ", ".join(f"{k} ({v} runs)" for k, v in sorted(manifest.get("numerics", {}).items()))
              or "not recorded"),
             ("Wall time", wall_time(manifest)),
             ("Dependency lock", ", ".join(f"{k} sha256 {v[:12]}…" for k, v in manifest.get("locks", {}).items())
              or "none found")]
    meta = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(str(v))}</dd>" for k, v in items)
    parts = [f"<h1>{html.escape(title)}</h1>", f'<dl class="meta">{meta}</dl>']
    if spec and spec.speed_check:
        parts.append(f'<div class="banner"><b>Speed check, not findings.</b> The “{profile}” profile runs the '
                     "paper's grid on random-init models of the paper's shapes: its timings say how fast that grid "
                     "runs on this machine; its metrics come from random weights, say nothing about which tokens "
                     "to mask, and are not compared with the paper.</div>")
    elif pipeline_check:
        parts.append(f'<div class="banner"><b>Pipeline check, not findings.</b> The “{profile}” profile runs a '
                     "tiny model on a few hundred examples to show that every step works end to end. Its numbers "
                     "say nothing about which tokens to mask, and they are not compared with the paper.</div>")
    if len(manifest.get("numerics", {})) > 1:
        parts.append('<div class="banner mixed"><b>Mixed numerics.</b> The runs of this folder were trained with '
                     "different precisions or devices (above); the per-run precision is in results.csv.</div>")
    return title, "\n".join(parts), pipeline_check


def _models_line(out_dir: Path) -> str:
    """The backbones this folder's runs used, each with what its MLM phase started from, read from results.csv:
    a profile's default backbone may have changed since (the cpu profile's did)."""
    import pandas as pd

    from typhoon.names import MLM_HEAD, PRETRAINED_MLM_HEAD

    table = out_dir / "results.csv"
    if not table.is_file():
        return "not recorded"
    names = sorted(set(pd.read_csv(table, usecols=["backbone"])["backbone"]))
    return "; ".join(f"{n}: {MLM_HEAD.get(n, PRETRAINED_MLM_HEAD)}" for n in names)


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


def wall_time(manifest: dict, now: datetime | None = None) -> str:
    """The header's wall time. The report is rendered at the end of a ``reproduce``, after the manifest's
    first write (before the analysis, whose ``wall_s`` is the grid's part so far and is ~0 when every cell
    was complete already; the last write, after the report, holds the whole): so the time is from its
    ``started`` to now, grid and analysis, and says so."""
    now = now or datetime.now(UTC)
    started = manifest.get("started")
    if started:
        seconds = (now - datetime.fromisoformat(started)).total_seconds()
        text = f"{seconds / 60:.1f} min for this reproduce, grid and analysis (from its start to this report)"
    elif manifest.get("wall_s") is not None:
        text = f"{manifest['wall_s'] / 60:.1f} min for this reproduce (the grid, before the analysis)"
    else:
        text = "not recorded"
    runs = invocations(manifest)
    if len(runs) > 1:  # a grid stopped and resumed: what every invocation into the folder took
        spans = [(datetime.fromisoformat(run["finished"] if run is not manifest else now.isoformat())
                  - datetime.fromisoformat(run["started"])).total_seconds() for run in runs]
        stopped = sum(run.get("outcome", "finished") != "finished" for run in runs)
        text += f"; {sum(spans) / 60:.1f} min over all {len(runs)} invocations into this folder ({stopped} stopped early)"
    if manifest.get("runs_wall_s"):
        text += (f"; {manifest['runs_wall_s'] / 60:.1f} min of training over {manifest.get('runs_ok', '?')} runs "
                 "(their records' own wall times, whenever they were trained)")
    return text


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


def build_report(out_dir: Path, notebooks: list[Path], profile: str | None, failed: list[str], pages) -> str:
    """The report page (HTML text) for the output folder ``out_dir`` and its executed ``notebooks``; ``failed``:
    a line per notebook that raised in a cell, said at the top; ``pages``: what the study puts in its Summary,
    as its policy says (a :class:`typhoon.report.study_pages.StudyPages`)."""
    out_dir = Path(out_dir).resolve()
    title, header, pipeline_check = header_html(out_dir, profile)
    if failed:
        header += ('\n<div class="banner mixed"><b>Analysis incomplete.</b> '
                   + "; ".join(html.escape(paths.redact(line, out_dir)) for line in failed)
                   + ". Its section shows the traceback at that cell; the other sections are complete.</div>")
    banner = ('<div class="banner">Pipeline check: the numbers in this section come from a pipeline-check profile '
              "(random weights or a few hundred examples) and are not findings.</div>") if pipeline_check else ""
    (first, second), summary = pages.titles, pages.summary_html(out_dir)  # what the study leads with
    sections, toc = [], [f'<li><a href="#summary">Summary</a><ol><li><a href="#claims">{first}</a></li>'
                         f'<li><a href="#headline-table">{second}</a></li>'
                         '<li><a href="#runs">The runs</a></li></ol></li>']
    for i, path in enumerate(notebooks):
        anchor = f"nb{i}"
        name, subsections, body = notebook_section(Path(path), anchor, out_dir, banner)
        sections.append(f"<section>{body}</section>")
        sub = "".join(f'<li><a href="#{a}">{html.escape(t)}</a></li>' for a, t in subsections)
        toc.append(f'<li><a href="#{anchor}">{html.escape(name)}</a>' + (f"<ol>{sub}</ol>" if sub else "") + "</li>")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body><main>",
        header, '<h2 id="summary">Summary</h2>', untestable_html(out_dir) if pipeline_check else "", summary,
        '<nav class="toc"><h2 id="contents">Contents</h2><ol>' + "".join(toc) + "</ol></nav>",
        *sections,
        "<hr><p>Regenerate with <code>python -m typhoon reproduce --profile "
        f"{html.escape(profile or '')}</code>; the tables behind every number are in <code>stats/</code> and "
        "<code>results.csv</code> beside this file.</p>",
        "</main></body></html>",
    ])


def render_report(out_dir: Path, notebooks: list[Path], profile: str | None, failed: list[str] = (), *,
                  pages) -> Path:
    """Write ``<out_dir>/report.html`` (atomically) and return its path; ``pages``: the study's
    (:class:`typhoon.report.study_pages.StudyPages`, as its policy says)."""
    target = Path(out_dir) / "report.html"
    atomic_write_text(target, build_report(out_dir, notebooks, profile, failed, pages))
    return target
