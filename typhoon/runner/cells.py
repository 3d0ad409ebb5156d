"""A grid's cell as a call: :func:`train_cell` trains one cell in whatever process calls it (a worker of the
local pool, :mod:`typhoon.runner.workers`; the worker process of a Dask or SLURM worker, :mod:`typhoon.runner.cluster`;
a walkthrough notebook opened by hand) through :func:`typhoon.training.run.run`, and returns its status row.
No Jupyter kernel: a cell costs its own set-up and training, nothing more.

Also here, for whoever runs cells: whether a cell is done, the failed record of a cell whose process died
before it could write one, and the removal of what such a cell left behind.
"""

from __future__ import annotations

import shutil
import time
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
from typhoon.training import progress_path


def cell_is_done(config: RunConfig, out_dir: Path) -> bool:
    """The cell has a complete record (ok) of the same run."""
    return is_complete(Path(out_dir) / config.relative_dir(), config)


def saved_boundary(config: RunConfig, out_dir: Path) -> str | None:
    """Where the cell's resume state in ``out_dir`` goes on from (``mlm``, ``mlm<e>``, ``ft<e>``: see
    :func:`typhoon.training.resume.describe`); None when it starts from scratch."""
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

    from typhoon.masking import plugins
    from typhoon.training import resume
    from typhoon.training.run import run

    if config.strategy_source:  # a strategy of your own: registered in this process too (the config travelled pickled)
        plugins.load(config.strategy_source)
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
                      resumed=resume.describe(record.resumed_after) if record.resumed_after else None)


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
