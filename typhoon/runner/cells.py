"""A study's unit of work as a call: a :class:`Cell` is what the one study loop (:mod:`typhoon.runner.study`)
hands to an executor -- a run's config, the *kind* of work it is and the folder it writes -- and
:func:`run_cell` runs it in whatever process calls it (a worker of the local pool, :mod:`typhoon.runner.workers`;
the worker process of a Dask or SLURM worker, :mod:`typhoon.runner.dask_executor`; a test, inline). No Jupyter
kernel: a cell costs its own set-up and training, nothing more.

Each kind (a :class:`CellKind`, the object a cell carries) says how a cell of it runs, when it is done, and what
to clean when the process running it died: :data:`TRAIN`, a grid's whole run (:func:`train_cell`, through
:func:`typhoon.training.run.run`, its record under the study folder) is the engine's; a study brings its own
kinds in its folder (``typhoon/studies/<name>/cells.py``).

Also here, for whoever runs cells: whether a grid's cell is done, the failed record of a cell whose process
died before it could write one, and the removal of what such a cell left behind.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from typhoon import paths
from typhoon.config import RunConfig
from typhoon.records import (
    LockedError,
    is_complete,
    record_lock,
    record_status,
    remove_stale_lock,
    resume_state_path,
    status_row,
    write_record,
)
from typhoon.training import Boundary, progress_path


class CellKind:
    """How the cells of one kind run (:meth:`run`, in the worker: the status row, never raising for the cell's
    own failure), when one is done (:meth:`is_done`, in the batch) and what a process that died running one
    leaves to clean (:meth:`lost`, in the batch, once no other run of it has started)."""

    def run(self, cell: Cell, out_dir: Path) -> dict:
        raise NotImplementedError

    def is_done(self, cell: Cell, out_dir: Path) -> bool:
        raise NotImplementedError

    def has_resume_state(self, cell: Cell, out_dir: Path) -> bool:
        """Whether a stopped run of ``cell`` left a state its next run goes on from."""
        return False

    def resume_note(self, cell: Cell, out_dir: Path) -> str | None:
        """What the loop says before the cell starts, when it goes on from a resume state (None: nothing; a kind
        that says it as it runs says nothing here)."""
        return None

    def epochs(self, cell: Cell) -> int:
        """How many epochs over its task's training text the cell trains (its MLM phase by default)."""
        return cell.config.mlm_epochs

    def clean(self, cell: Cell, out_dir: Path) -> None:
        """Remove what a run of ``cell`` whose process died left half-written (its resume state stays)."""

    def lost(self, cell: Cell, out_dir: Path, error: str, traceback_text: str | None = None) -> None:
        """The cell's process died, or its call raised: clean up; a kind with records also records it failed
        (by default nothing is recorded: the cell's row says failed, and it runs again next time)."""
        self.clean(cell, out_dir)


class TrainCell(CellKind):
    """A grid's whole run: :func:`train_cell` under ``<out_dir>/<cell.under>``."""

    def run(self, cell: Cell, out_dir: Path) -> dict:
        return {**train_cell(cell.config, Path(out_dir) / cell.under), "record_path": cell.path}

    def is_done(self, cell: Cell, out_dir: Path) -> bool:
        return cell_is_done(cell.config, Path(out_dir) / cell.under)

    def has_resume_state(self, cell: Cell, out_dir: Path) -> bool:
        return resume_state_path(Path(out_dir) / cell.path).exists()

    def resume_note(self, cell: Cell, out_dir: Path) -> str | None:
        """What the whole run goes on from, when it has a resume state (the run checks the state is its own, and
        says so again as it loads it)."""
        boundary = saved_boundary(cell.config, Path(out_dir) / cell.under)
        return f"{cell.path}: resumes after {boundary.describe()} (its resume state)" if boundary else None

    def epochs(self, cell: Cell) -> int:
        return cell.config.mlm_epochs + cell.config.ft_epochs

    def clean(self, cell: Cell, out_dir: Path) -> None:
        remove_cell_leftovers(cell.config, Path(out_dir) / cell.under)

    def lost(self, cell: Cell, out_dir: Path, error: str, traceback_text: str | None = None) -> None:
        self.clean(cell, out_dir)
        record_failure(cell.config, Path(out_dir) / cell.under, error, traceback_text)


TRAIN = TrainCell()


@dataclass(frozen=True)
class Cell:
    """One unit of a study's work (see the module docstring): ``config``, the run it belongs to; ``kind``, how it
    runs (a :class:`CellKind`: :data:`TRAIN` or a study's own); ``folder``, what it writes, relative to the study's output folder (a ``train`` cell's
    record folder, its config's under ``folder``'s parent: ``under``); ``args``, the kind's own arguments as
    (name, value) pairs (a curve epoch's epoch and resume state); ``seconds``, its estimated time (the loop hands
    out the longest first)."""

    config: RunConfig
    kind: CellKind = TRAIN
    under: str = ""  # train: the record's root below the study folder ("" or, say, "finetune")
    folder: str = ""  # other kinds: their folder below the study folder
    args: tuple = ()
    seconds: float | None = None

    @property
    def path(self) -> str:
        """The folder it writes, relative to the study folder: its status row's ``record_path``."""
        if self.folder:
            return self.folder
        relative = self.config.relative_dir().as_posix()
        return f"{self.under}/{relative}" if self.under else relative

    def arg(self, name: str):
        return dict(self.args)[name]

    def placed(self, **execution) -> Cell:
        """This cell with the execution fields of its config set (``device``, ``num_threads``: where it runs,
        never what it computes)."""
        return dataclasses.replace(self, config=self.config.replace(**execution)) if execution else self


def run_cell(cell: Cell, out_dir: str | Path) -> dict:
    """Run one cell in this process: its status row (``STATUS_COLUMNS``; ``record_path`` is ``cell.path``)."""
    return cell.kind.run(cell, Path(out_dir))


def cell_row(cell: Cell, status: str, **details) -> dict:
    """The status row of ``cell`` (:func:`typhoon.records.status_row`, its ``record_path`` the cell's folder)."""
    return {**status_row(cell.config, status, **details), "record_path": cell.path}


def cell_is_done(config: RunConfig, out_dir: Path) -> bool:
    """The cell has a complete record (ok) of the same run."""
    return is_complete(Path(out_dir) / config.relative_dir(), config)


def saved_boundary(config: RunConfig, out_dir: Path) -> Boundary | None:
    """Where the cell's resume state in ``out_dir`` goes on from (:class:`typhoon.training.Boundary`); None when it
    starts from scratch."""
    from typhoon.training import resume  # torch: only where a state is read

    return resume.saved_boundary(resume_state_path(Path(out_dir) / config.relative_dir()))


def train_cell(config: RunConfig, out_dir: str | Path) -> dict:
    """Train one cell in this process (its record under ``out_dir``); its status row (``STATUS_COLUMNS``).

    A cell's failure is recorded (by the run: a failed record with its traceback) and returned as a row,
    never raised: the grid goes on. A file-system error (a full disk, no permission) is what every other
    cell would meet too: it comes back as the row's ``os_error`` ([errno, message, path]) for the batch to
    stop on. A stop (``KeyboardInterrupt``: Ctrl-C, SIGTERM) propagates: the run has left its resume state
    and no record. ``resumed`` says the boundary the run went on from, if it resumed."""
    import torch

    from typhoon.training.run import run

    out_dir = Path(out_dir)
    started = time.perf_counter()
    try:
        record = run(config, out_dir, progress=False)
    except Exception as err:  # a cell's failure (an out-of-memory too): the run wrote its failed record
        if isinstance(err, torch.OutOfMemoryError):
            release_device_memory()  # the failed cell's tensors are garbage now: hand them to the device's next cells
        row = status_row(config, "failed", error=f"{type(err).__name__}: {error_line(err)}",
                         seconds=time.perf_counter() - started)
        if paths.is_file_system_error(err):
            row["os_error"] = [err.errno, err.strerror, err.filename]
        return row
    return status_row(config, "skipped" if record.skipped else "ok", seconds=time.perf_counter() - started,
                      resumed=record.resumed_after)


def release_device_memory() -> None:
    """Give the CUDA memory cached by this process back to the device (other workers share it)."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def error_line(error: BaseException) -> str:
    """The last line of an error's message (a traceback's gist), or '' when it has none."""
    text = str(error).strip()
    return text.splitlines()[-1] if text else ""


def record_failure(config: RunConfig, out_dir: Path, error: str, traceback_text: str | None = None) -> None:
    """Record a cell failed that died before its run could record it (its process was killed, lost with its
    worker). Nothing is written where the run recorded its own failure, or while another process writes it."""
    run_dir = Path(out_dir) / config.relative_dir()
    if record_status(run_dir, config) == "failed":
        return
    try:
        with record_lock(run_dir):
            write_record(run_dir, config, {"status": "failed", "error": error},
                         traceback_text=traceback_text or f"{error}\n")
    except LockedError:
        pass  # another process is writing this record right now; it will record its own outcome


def remove_cell_leftovers(config: RunConfig, out_dir: Path) -> None:
    """Remove what a run of one cell that died with its process left: the record's staging folders, the temp
    file of a resume state it was saving, its progress file and an unheld record lock. Its resume state stays:
    the cell's next run goes on from it. Called by whoever notices the loss, once no other run of the cell has
    started (a cell runs in one process at a time)."""
    run_dir = Path(out_dir) / config.relative_dir()
    resume_state = resume_state_path(run_dir)
    for path in [*run_dir.parent.glob(f".{run_dir.name}.tmp-*"), *run_dir.parent.glob(f".{resume_state.name}.tmp-*"),
                 *run_dir.parent.glob(f".{run_dir.name}.old-*"), progress_path(run_dir)]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    remove_stale_lock(run_dir.with_name(f".{run_dir.name}.lock"))
