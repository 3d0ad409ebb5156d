"""The results block of the README: the headline, the paper's claims and the provenance line as Markdown,
written between the README's markers (``python -m typhoon results-readme``) or checked against it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from typhoon import atomic, machine, paths
from typhoon.analysis.paper_claims import (
    Tables,
    claims_table,
    headline,
    headline_table,
    holm_caption,
    read_tables,
)
from typhoon.records import provenance, run_numerics

README_BEGIN = "<!-- results:begin -->"


README_END = "<!-- results:end -->"


def markdown_table(frame: pd.DataFrame) -> str:
    """A pipe table (``|`` in cells escaped)."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in frame.columns) + " |",
             "|" + "|".join("---" for _ in frame.columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def results_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's Results block for the reference run in ``out_dir``; links are relative to
    ``link_base`` (the folder of the README, default the repository)."""
    tables = read_tables(out_dir)
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(tables.out_dir, base)).as_posix()
    manifest = provenance.read_manifest(tables.out_dir) or {}
    lines = [f"Reference run of the `{tables.profile}` profile (`{rel}/`): "
             + _provenance_line(manifest, tables) + ".", "", f"**{headline(tables)}**", ""]
    mix = run_numerics.results_numerics(tables.results) if "precision" in tables.results else {}
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
              "Each claim is judged on the runs it is about, by its criterion (stated before the data): reproduced "
              "when the 95 % interval lies inside the criterion, contradicted when it lies outside, not decided "
              "when it straddles.", "",
              markdown_table(claims_table(tables)), "",
              f"The full report: [`{rel}/report.html`]({rel}/report.html); the executed notebooks: "
              f"[`{rel}/notebooks/`]({rel}/notebooks/); the tables: [`{rel}/stats/`]({rel}/stats/)."]
    return "\n".join(lines)


def _provenance_line(manifest: dict, tables: Tables) -> str:
    parts = [provenance.trained_at_line(tables.out_dir, manifest)]
    if manifest.get("finished"):
        parts.append(manifest["finished"][:10])
    trained = [m["machine"] for m in [*manifest.get("history", []), manifest]
               if m.get("machine") and (m.get("cells") or {}).get("ok")]
    made = manifest.get("machine")
    for line in dict.fromkeys(machine.machine_line(m) for m in trained):
        parts.append(f"trained on {line}")
    if made and (not trained or machine.machine_line(made) != machine.machine_line(trained[-1])):
        parts.append(f"tables made on {machine.machine_line(made)}")
    if manifest.get("runs_wall_s"):
        parts.append(f"{len(tables.results)} runs, {manifest['runs_wall_s'] / 60:.0f} min of training")
    return "; ".join(parts) or "no MANIFEST.json"


def readme_block(out_dir: str | os.PathLike, readme: Path) -> str:
    """The marked block as it belongs in ``readme`` (markers included)."""
    return f"{README_BEGIN}\n{results_markdown(out_dir, readme.parent)}\n{README_END}"


def update_readme(out_dir: str | os.PathLike, readme: str | os.PathLike | None = None, check: bool = False) -> bool:
    """Rewrite the block between :data:`README_BEGIN` and :data:`README_END` in ``readme`` (default: the
    repository's README.md) from ``out_dir``'s tables; returns whether it changed (``check``: do not write)."""
    readme = Path(readme) if readme else paths.repo_root() / "README.md"
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{paths.shown(readme)} has no Results block: add the lines {README_BEGIN} and {README_END}")
    new = pattern.sub(lambda _: readme_block(out_dir, readme), text, count=1)
    if new != text and not check:
        atomic.atomic_write_text(readme, new)
    return new != text


def readme_block_in(readme: Path) -> str | None:
    """The Results block currently in ``readme`` (markers included), None if it has none."""
    match = re.search(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), readme.read_text(encoding="utf-8"),
                      re.S)
    return match.group(0) if match else None
