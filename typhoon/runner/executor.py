"""The one interface through which the study loop (:mod:`typhoon.runner.study`) runs cells, whatever runs them:
the local pool of worker processes (:class:`typhoon.runner.workers.WorkerPool`) or a Dask cluster, SLURM's
included (:class:`typhoon.runner.dask_executor.DaskExecutor`).

The loop submits cells, polls for the status rows of those that finished (``STATUS_COLUMNS``: ok, failed,
skipped; ``stopped`` after a stop), and on a stop or an error stops them all. Looking after the workers is the
executor's business, done while it polls: a local worker that died has its cell recorded failed and is
replaced; a cluster's lost worker has its cell run again elsewhere, up to its retries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from typhoon.config import RunConfig


class CellExecutor(ABC):
    """Runs a grid's cells (see the module docstring). A context manager: ``close`` on the way out."""

    @abstractmethod
    def submit(self, config: RunConfig, out_dir: Path) -> None:
        """Queue a cell; it runs once a worker is free."""

    @abstractmethod
    def poll(self, timeout_s: float) -> list[dict]:
        """The status rows of the cells that finished since the last call, waiting up to ``timeout_s`` for
        one; the workers are looked after meanwhile. A file-system error of a cell comes back as its row's
        ``os_error``; the loop stops the grid on it."""

    @abstractmethod
    def pending(self) -> int:
        """Cells submitted whose row :meth:`poll` has not returned yet."""

    @abstractmethod
    def stop(self) -> None:
        """Stop now: no queued cell starts, the running ones stop within seconds, leaving their resume states
        and no record."""

    @abstractmethod
    def close(self) -> None:
        """Let the workers go (after the last cell, or after a stop)."""

    def __enter__(self) -> CellExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
