"""The HTML report of one output folder, as a page: a reader can read it offline, without the code.

``render_report(out_dir, notebooks, profile, pages=...)`` writes ``<out_dir>/report.html``: a header (the
profile, date, commit, machine, numerics, wall time), the Summary the study's policy gives
(:mod:`typhoon.report.study_pages`; its blocks are :mod:`typhoon.report.summary_html`'s: for a reference run,
the headline, the paper's claims checked and the headline table), a table of contents, then one section per
executed notebook (:mod:`typhoon.report.notebook_html`: its prose and outputs, never its code, parameters,
stderr or progress bars). The page's one style sheet sets the column width the figures are made for.
Each profile has its own output folder, so one profile's report never overwrites another's.
A pipeline-check profile (smoke) says so at the top and in every section.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from typhoon import paths
from typhoon.atomic import atomic_write_text
from typhoon.machine import machine_line
from typhoon.records import invocations, now, read_manifest, trained_at_line
from typhoon.report.notebook_html import notebook_section
from typhoon.report.summary_html import untestable_html

REPORT_WIDTH_PX = 1100  # the content column; figures are made to be read at this width (typhoon.report.figures)

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

    from typhoon.names import mlm_head_of

    table = out_dir / "results.csv"
    if not table.is_file():
        return "not recorded"
    names = sorted(set(pd.read_csv(table, usecols=["backbone"])["backbone"]))
    return "; ".join(f"{n}: {mlm_head_of(n)}" for n in names)


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
