"""The README's answer (``python -m typhoon results-readme --answer``): every comparison of the decisive design, the
verdict each sequential study reached, one column per study's backbone (:func:`answer_markdown`)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from typhoon import paths
from typhoon.analysis import markdown_table
from typhoon.profiles import get_profile
from typhoon.report import rewrite_block
from typhoon.studies.sequential.pages import interval_text, mixed_seeds_text

# The README's first table: the decisive studies' verdicts, one column per backbone (python -m typhoon
# results-readme --answer). Listed in the order a reader should weigh them: the study on the backbone that
# models language first, the fresh-head one kept beside it, labelled.
ANSWER_BEGIN = "<!-- answer:begin -->"


ANSWER_END = "<!-- answer:end -->"


ANSWER_STUDIES = ("decisive-mlm", "decisive")  # profiles; each one's committed folder is results/<profile>


MIXED_MARK = "†"  # an answer-table verdict that rests on seeds whose arms ran on different kernel families


def mixed_dependent(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The comparisons whose verdict rests on their mixed-numerics seeds (stats/verdicts.csv ``mixed_seeds``):
    without those seeds the design gives another verdict (``verdict_without_mixed``)."""
    if "verdict_without_mixed" not in verdicts:
        return verdicts.iloc[:0]
    mixed = verdicts["mixed_seeds"].map(lambda v: bool(mixed_seeds_text(v))).astype(bool)
    return verdicts[mixed & (verdicts["verdict_without_mixed"].astype(str) != verdicts["verdict"])]


def _study_column(profile: str, verdicts: pd.DataFrame | None, n_records: int) -> tuple[str, dict, list[str]]:
    """The answer table's column for one decisive study: its header (backbone, seeds), per (task,
    comparison) the verdict with the difference (marked :data:`MIXED_MARK` where it rests on mixed-numerics
    seeds), and the notes that say what such a verdict is without them."""
    backbone = ", ".join(get_profile(profile).backbones)
    if verdicts is None:
        return f"{backbone} ({n_records} record{'' if n_records == 1 else 's'}, no look yet)", {}, []
    seeds = f"{verdicts['n_seeds'].min()}–{verdicts['n_seeds'].max()}" if verdicts["n_seeds"].nunique() > 1 else \
        str(verdicts["n_seeds"].iloc[0])
    marked = mixed_dependent(verdicts)
    cells = {(row.task, row.comparison): f"{row.verdict} ({row.difference:+.4f})"
             + (MIXED_MARK if row.Index in marked.index else "") for row in verdicts.itertuples()}
    notes = [f"{MIXED_MARK} {backbone}, {r.task} {r.comparison}: {r.verdict} only with its {mixed_seeds_text(r.mixed_seeds)}, "
             f"whose arms ran on different kernel families ({r.mixed_kernels}); without those mixed-numerics seeds "
             f"the verdict is “{r.verdict_without_mixed}”"
             + (" (not decided: the design would add seeds)" if r.verdict_without_mixed == "continue" else "")
             + f", TOST {interval_text(r.tost_low_without_mixed, r.tost_high_without_mixed)} on the "
             f"{int(r.n_seeds_without_mixed)} seeds left." for r in marked.itertuples()]
    return f"{backbone} ({seeds} seeds)", cells, notes


def answer_markdown(studies: tuple[str, ...] = ANSWER_STUDIES, root: Path | None = None) -> str:
    """The README's answer: every comparison of the decisive design, the verdict (and paired difference,
    first − second arm) each study reached, one column per study's backbone. A study without a look yet
    says how many records it has; its column is empty. A verdict that rests on mixed-numerics seeds is
    marked, and a note under the table gives the verdict without them."""
    root = Path(root) if root else paths.repo_root()
    columns, order, margins = [], [], {}
    for profile in studies:
        folder, spec = root / "results" / profile, get_profile(profile)
        design = spec.design
        margins.update(design["margin"])
        order += [(task, " - ".join(pair)) for task in spec.tasks for pair in design["comparisons"]
                  if (task, " - ".join(pair)) not in order]
        verdicts_csv = folder / "stats" / "verdicts.csv"
        n_records = len(list(folder.glob("runs/*/*/*/seed*/metrics.json")))  # records land before a look's tables
        columns.append(_study_column(profile, pd.read_csv(verdicts_csv) if verdicts_csv.is_file() else None,
                                     n_records))
    table = pd.DataFrame({"task": [t for t, _ in order], "comparison": [c for _, c in order],
                          "margin": [f"±{margins[t]:g}" for t, _ in order],
                          **{header: [cells.get(key, "") for key in order] for header, cells, _ in columns}})
    notes = [note for _, _, column_notes in columns for note in column_notes]
    return "\n\n".join([markdown_table(table), *notes])


def update_answer(readme: str | os.PathLike | None = None, check: bool = False,
                  studies: tuple[str, ...] = ANSWER_STUDIES) -> bool:
    """Rewrite the README's answer table (between :data:`ANSWER_BEGIN` and :data:`ANSWER_END`) from the
    decisive studies' committed tables; returns whether it changed (``check``: do not write)."""
    readme = Path(readme) if readme else paths.repo_root() / "README.md"
    root = readme.parent if readme.parent != paths.repo_root() else None
    return rewrite_block(readme, ANSWER_BEGIN, ANSWER_END, f"{ANSWER_BEGIN}\n{answer_markdown(studies, root)}\n{ANSWER_END}",
                          check, "the decisive studies")
