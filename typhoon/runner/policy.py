"""What a study is to the one study loop (:func:`typhoon.runner.study.run_study`): a :class:`StudyPolicy`.

The loop asks a policy for the cells of its next look (a :class:`Look`), runs them, and asks again, handing it
what the look did, until a look has no cell; then the policy makes what it makes of them (its tables, notebooks,
report) and says its answer (:class:`Finished`). Three methods make a policy (:meth:`StudyPolicy.cells`,
:meth:`~StudyPolicy.next_look`, :meth:`~StudyPolicy.finish`); four more have the plain answer (checks before
anything is written, the folder's set-up, a line on where it stands, the commit message). The loop branches on no
kind of study: a study's policy lives in its folder (``typhoon/studies/<name>/policy.py``). :class:`OneLook` is a
study of one look, every cell not done yet.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from typhoon import paths
from typhoon.runner import progress
from typhoon.runner.cells import Cell, cell_row


@dataclass(frozen=True)
class Look:
    """The cells a look runs (none: the study is done) and how many cells of its scope were complete already (the
    progress line counts them)."""

    cells: list[Cell] = field(default_factory=list)
    complete: int = 0


@dataclass(frozen=True)
class Finished:
    """What a study made at its end: its report, if it writes one, and what it says after the summary (its answer,
    the comparison with a reference run)."""

    report: Path | None = None
    said: tuple[str, ...] = ()


class StudyPolicy(ABC):
    """A study as the loop runs it (see the module docstring).

    ``configs``: every run config the study may train (what the worker count and the GPUs' memory are chosen
    for); ``profile``: the profile whose folder this is (its manifest names it), None for a study with no
    profile (a study run by its own command); ``plan``: the estimate made before the cells, kept in the manifest;
    ``title`` and ``log_name``: what the log calls the study, and its file in the output folder; ``pages``: what
    it puts in its report's Summary and on the results page (:class:`typhoon.report.StudyPages`; None: no report).
    """

    configs: list = []
    pages = None
    profile: str | None = None
    plan: dict | None = None
    title = "study"
    log_name = "study.log"

    @abstractmethod
    def cells(self, out_dir: Path) -> list[Cell]:
        """Every cell of the study as it stands (done or not): the summary and the stop's message count them."""

    @abstractmethod
    def next_look(self, out_dir: Path, log: progress.RunLog, last: pd.DataFrame | None) -> Look:
        """The cells the next look runs (none when the study is done); ``last``: the status rows of the look
        before (None before the first), from which a study that stops at a failed cell knows to stop."""

    @abstractmethod
    def finish(self, out_dir: Path, cells: pd.DataFrame, log: progress.RunLog, run: dict) -> Finished:
        """After the last look: what the study makes of its cells (``run``: started, wall_s, command, code, clock)
        -- its own tables, notebooks, report -- and what it says."""

    def preflight(self) -> None:  # noqa: B027 - a hook: most studies have nothing to check
        """Check, before anything is written, what the cells will need (data, backbones)."""

    def prepare(self, out_dir: Path, log: progress.RunLog, commit_records: bool, workers: int) -> None:  # noqa: B027
        """Under the folder's lock, before the first look (copy reusable records, refuse mixed numerics, estimate
        the whole study on ``workers``)."""

    def describe(self, out_dir: Path) -> str:
        """Where the study stands, in words: at its start and when it is stopped."""
        every = self.cells(out_dir)
        done = sum(cell.kind.is_done(cell, out_dir) for cell in every)
        return f"{len(every)} cells ({len(every) - done} to run, {done} complete already)"

    def commit_message(self, out_dir: Path) -> str:
        return f"{paths.shown(out_dir)}: tables, figures, notebooks and report"


def status_table(policy: StudyPolicy, ran: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """A status row for every cell of the study that ran or is done: those that ran as they ran, the others
    ``skipped`` (a cell neither run nor done, beyond a sequential design's last look, has none)."""
    rows = {row["record_path"]: row for row in ran.to_dict("records")}
    table = [rows.pop(cell.path) if cell.path in rows else cell_row(cell, "skipped")
             for cell in policy.cells(out_dir) if cell.path in rows or cell.kind.is_done(cell, out_dir)]
    return pd.DataFrame(table + list(rows.values()), columns=ran.columns if len(ran.columns) else None)


def failed(last: pd.DataFrame | None) -> bool:
    """Whether a cell of the look before failed (a study that stops there says so and asks for no more)."""
    return last is not None and not last["status"].isin(["ok", "skipped"]).all()


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
    (``device``, ``num_threads``: where it runs, never what it computes). Its ``finish`` makes nothing by default:
    a study of one look writes its table there."""

    def __init__(self, cells: list[Cell], execution: dict | None = None):
        self.every = [cell.placed(**(execution or {})) for cell in cells]
        self.configs = [cell.config for cell in cells]

    def cells(self, out_dir: Path) -> list[Cell]:
        return self.every

    def next_look(self, out_dir: Path, log: progress.RunLog, last: pd.DataFrame | None) -> Look:
        if last is not None:
            return Look()
        todo = [cell for cell in self.every if not cell.kind.is_done(cell, out_dir)]
        return Look(todo, len(self.every) - len(todo))

    def finish(self, out_dir: Path, cells: pd.DataFrame, log: progress.RunLog, run: dict) -> Finished:
        return Finished()

    def preflight(self) -> None:
        preflight(self.configs)
