"""What a reader of the repository's Markdown sees of the committed runs, generated from their tables and
written between markers (``python -m typhoon results-readme``) or checked against them: the results page
(:data:`RESULTS_PAGE`, ``docs/results.md``) holds one block per study folder, the block each study's pages say
(:class:`typhoon.report.study_pages.StudyPages`: its markers and its Markdown). Here what every block shares: the
markers of a folder's own block, where the folder's runs were made and trained, and the rewriting of a block."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from typhoon import atomic, machine, paths
from typhoon.analysis import Tables
from typhoon.records import read_json, trained_at_line

RESULTS_PAGE = Path("docs") / "results.md"  # under the repository root: where the study blocks live


def own_markers(out_dir: str | os.PathLike, kind: str = "results") -> tuple[str, str]:
    """The markers of a study's own block, ``<!-- <kind>:<folder>:begin -->`` ... ``:end -->`` (kind
    ``results`` for a reference run, ``decisive`` for a sequential study): two studies of one kind
    (``results/cpu`` and ``results/cpu-mlm``; ``results/decisive`` and ``results/decisive-mlm``) each get a
    block. A page without them keeps the kind's one block (:data:`README_BEGIN`, :data:`DECISIVE_BEGIN`)."""
    name = Path(out_dir).resolve().name
    return f"<!-- {kind}:{name}:begin -->", f"<!-- {kind}:{name}:end -->"


def shown_folder(out_dir: str | os.PathLike, link: str) -> str:
    """A results folder as a reader types it: relative to the repository root; outside the repository,
    as ``link`` reaches it from the page."""
    folder, root = Path(out_dir).resolve(), paths.repo_root().resolve()
    return folder.relative_to(root).as_posix() if folder.is_relative_to(root) else link


def provenance_line(manifest: dict, tables: Tables) -> str:
    parts = [trained_at_line(tables.out_dir, manifest)]
    if manifest.get("finished"):
        parts.append(manifest["finished"][:10])
    trained = [m["machine"] for m in [*manifest.get("history", []), manifest]
               if m.get("machine") and (m.get("cells") or {}).get("ok")]
    made = manifest.get("machine")
    for line in dict.fromkeys(machine.machine_line(m) for m in trained):
        parts.append(f"trained on {line}")
    if not trained:  # every record reused from another study: the CPUs the records themselves name
        parts += [f"records trained on {line}" for line in _record_cpus(tables)]
    if made and (not trained or machine.machine_line(made) != machine.machine_line(trained[-1])):
        parts.append(f"tables made on {machine.machine_line(made)}")
    if manifest.get("runs_wall_s"):
        parts.append(f"{len(tables.results)} runs, {manifest['runs_wall_s'] / 60:.0f} min of training")
    return "; ".join(parts) or "no MANIFEST.json"


def _record_cpus(tables: Tables) -> list[str]:
    """Each CPU the folder's records were trained on, as ``metrics.json`` ``hardware.cpu`` names it (model and
    the flags that decide the precision), for a folder whose own runs trained none of them."""
    lines = {}
    for path in tables.results.get("record_path", pd.Series(dtype=str)).dropna():
        metrics = read_json(tables.out_dir / path / "metrics.json") or {}
        cpu = (metrics.get("hardware") or {}).get("cpu") or {}
        if cpu.get("model"):
            flags = [flag for flag in machine.CPU_FLAGS if cpu.get(flag)]
            lines[f"{cpu['model']} ({', '.join(flags)})" if flags else cpu["model"]] = None
    return list(lines)


def _markers(out_dir: str | os.PathLike, page: Path, pages) -> tuple[str, str, Callable[..., str]]:
    """The markers of the folder's block on ``page`` (its own where the page has them) and the function that
    writes it, as the study's ``pages`` say (a :class:`typhoon.report.study_pages.StudyPages`)."""
    if pages.own_kind is not None:
        begin, end = own_markers(out_dir, pages.own_kind)
        if page.is_file() and begin in page.read_text(encoding="utf-8"):
            return begin, end, pages.markdown
    return *pages.markers, pages.markdown


def rewrite_block(page: Path, begin: str, end: str, block: str, check: bool, what: str) -> bool:
    text = page.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{paths.shown(page)} has no block for {what}: add the lines {begin} and {end}")
    new = pattern.sub(lambda _: block, text, count=1)
    if new != text and not check:
        atomic.atomic_write_text(page, new)
    return new != text


def readme_block(out_dir: str | os.PathLike, readme: Path, pages) -> str:
    """The marked block as it belongs in ``readme`` (markers included), as the study's ``pages`` say (a
    sequential study's verdicts, a schedules grid's comparisons, a reference run's Results block)."""
    begin, end, markdown = _markers(out_dir, readme, pages)
    return f"{begin}\n{markdown(out_dir, readme.parent)}\n{end}"


def update_readme(out_dir: str | os.PathLike, readme: str | os.PathLike | None = None, check: bool = False, *,
                  pages) -> bool:
    """Rewrite the block of ``out_dir`` in ``readme`` (default: the results page :data:`RESULTS_PAGE`) from its
    tables, between the markers its study's ``pages`` name (:class:`typhoon.report.study_pages.StudyPages`: the
    folder's own where the page has them); returns whether it changed (``check``: do not write)."""
    readme = Path(readme) if readme else paths.repo_root() / RESULTS_PAGE
    begin, end, _ = _markers(out_dir, readme, pages)
    return rewrite_block(readme, begin, end, readme_block(out_dir, readme, pages), check, paths.shown(Path(out_dir)))


def readme_block_in(readme: Path, begin: str, end: str) -> str | None:
    """The block between ``begin`` and ``end`` currently in ``readme`` (markers included), None if it has none."""
    match = re.search(re.escape(begin) + r".*?" + re.escape(end), readme.read_text(encoding="utf-8"), re.S)
    return match.group(0) if match else None
