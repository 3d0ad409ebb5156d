"""An executor for the tests: each submitted cell runs in this process, one after the other, at the next poll
(``typhoon.runner.cells.run_cell``, or a fake given as ``cell_fn(cell, out_dir)``): the study loop without worker
processes."""

from __future__ import annotations

from typhoon.runner.executor import CellExecutor


class InlineExecutor(CellExecutor):
    def __init__(self, cell_fn=None):
        from typhoon.runner.cells import run_cell

        self.cell_fn = cell_fn or run_cell
        self.queue: list = []
        self.ran: list = []  # the configs of the cells it ran, in order
        self.batches: list[list] = []  # the configs of each poll that ran any: a study's looks
        self.closed = self.stopped = False

    def submit(self, cell, out_dir) -> None:
        self.queue.append((cell, out_dir))

    def poll(self, timeout_s: float) -> list[dict]:
        rows = []
        if self.queue:
            self.batches.append([cell.config for cell, _ in self.queue])
        while self.queue:
            cell, out_dir = self.queue.pop(0)
            self.ran.append(cell.config)
            rows.append(self.cell_fn(cell, out_dir))
        return rows

    def pending(self) -> int:
        return len(self.queue)

    def stop(self) -> None:
        self.stopped = True
        self.queue.clear()

    def close(self) -> None:
        self.closed = True
