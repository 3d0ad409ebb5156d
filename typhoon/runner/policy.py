"""What a study is to the one study loop (:func:`typhoon.runner.study.run_study`): a :class:`StudyPolicy`.

The loop asks a policy for the cells of its next look, runs them, and asks again until it has none; then the
policy makes what it makes of them (tables, notebooks, a report) and says its answer. A policy owns its study's
report and its answer: the loop, the report and the README ask it, never what kind of study a folder holds.
The policies: :class:`typhoon.studies.grid.policy.FixedGrid` (a profile's grid), :class:`typhoon.studies.sequential.policy.
SequentialDesign` (a profile's sequential design) and the KL studies' parts (:mod:`typhoon.studies.kl_original.policy`).

Three methods make a policy (:meth:`StudyPolicy.cells`, :meth:`~StudyPolicy.next_look`, :meth:`~StudyPolicy.finish`);
the others have the plain study's answer and are written where a study differs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

import pandas as pd

from typhoon import paths
from typhoon.runner import progress
from typhoon.runner.cells import Cell, cell_row


class StudyPolicy(ABC):
    """A study as the loop runs it (see the module docstring).

    ``configs``: every run config the study may train (what the worker count and the GPUs' memory are chosen
    for); ``profile``: the profile whose folder this is (its manifest names it), None for a study with no
    profile (the KL studies); ``plan``: the estimate made before the cells, kept in the manifest;
    ``title`` and ``log_name``: what the log calls the study, and its file in the output folder; ``pages``: what
    it puts in its report's Summary and on the results page (:mod:`typhoon.report.study_pages`; None: no report).
    """

    configs: list = []
    pages = None
    profile: str | None = None
    plan: dict | None = None
    title = "study"
    log_name = "study.log"

    @abstractmethod
    def cells(self, out_dir: Path) -> list[Cell]:
        """Every cell of the study as it stands (done or not): the stop's summary counts them."""

    @abstractmethod
    def next_look(self, out_dir: Path, log: progress.RunLog) -> list[Cell]:
        """The cells the next look runs; none when the study is done."""

    @abstractmethod
    def finish(self, out_dir: Path, cells: pd.DataFrame, log: progress.RunLog, run: dict) -> Path | None:
        """After the last look: what the study makes of its cells (``run``: started, wall_s, command, code);
        the report's path, if it writes one."""

    def preflight(self) -> None:  # noqa: B027 - a hook: most studies have nothing to check
        """Check, before anything is written, what the cells will need (data, backbones)."""

    def prepare(self, out_dir: Path, log: progress.RunLog, commit_records: bool) -> None:  # noqa: B027 - a hook
        """Under the folder's lock, before the first look (copy reusable records, refuse mixed numerics)."""

    def before_cells(self, out_dir: Path, workers: int, log: progress.RunLog) -> None:  # noqa: B027 - a hook
        """After the log's first line, before the first look (an estimate of the whole study)."""

    def describe(self, out_dir: Path) -> str:
        every = self.cells(out_dir)
        done = sum(cell.kind.is_done(cell, out_dir) for cell in every)
        return f"{len(every)} cells ({len(every) - done} to run, {done} complete already)"

    def done_before(self, out_dir: Path, todo: list[Cell]) -> int:
        """How many cells of the look's scope were complete already (the progress line counts them)."""
        return 0

    def go_on(self, ran: pd.DataFrame, log: progress.RunLog) -> bool:
        """Whether the study goes on after a look (a failed cell is recorded; the others still run)."""
        return True

    def status_table(self, cells: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
        """Every cell's status row: those that ran, and the others as ``skipped``."""
        ran = {row["record_path"]: row for row in cells.to_dict("records")}
        rows = [ran.get(cell.path) or cell_row(cell, "skipped") for cell in self.cells(out_dir)]
        return pd.DataFrame(rows, columns=cells.columns if len(cells.columns) else None)

    def standing(self, out_dir: Path) -> str | None:
        """Where the study stands, in words, when it is stopped between looks (None: nothing to add)."""
        return None

    def answer(self, out_dir: Path) -> list[str]:
        """The study's answer, in sentences, at its end."""
        return []

    def after(self, out_dir: Path, report: Path | None) -> list[str]:
        """Lines said after the summary (the comparison with a reference run)."""
        return []

    def commit_message(self, out_dir: Path) -> str:
        return f"{paths.shown(out_dir)}: tables, figures, notebooks and report"


def preflight(configs: list) -> None:
    """Check that every task's data and every backbone of ``configs`` load, before anything is written."""
    from typhoon.data import load_glue, require_labelled_splits
    from typhoon.models import load_backbone

    for task in dict.fromkeys(c.task for c in configs):
        require_labelled_splits(load_glue(task), task)
    for name in dict.fromkeys(c.backbone for c in configs):
        load_backbone(name)


class OneLook(StudyPolicy):
    """A study of one look: every cell of ``cells`` not done yet, each placed where ``execution`` says
    (``device``, ``num_threads``: where it runs, never what it computes)."""

    def __init__(self, cells: list[Cell], execution: dict | None = None):
        self.every = [cell.placed(**(execution or {})) for cell in cells]
        self.looked = False
        self.configs = [cell.config for cell in cells]

    def cells(self, out_dir: Path) -> list[Cell]:
        return self.every

    def next_look(self, out_dir: Path, log: progress.RunLog) -> list[Cell]:
        if self.looked:
            return []
        self.looked = True
        return [cell for cell in self.every if not cell.kind.is_done(cell, out_dir)]

    def done_before(self, out_dir: Path, todo: list[Cell]) -> int:
        return len(self.every) - len(todo)

    def preflight(self) -> None:
        preflight(self.configs)
