"""Run a notebook's code in the test's own process: its code cells in order, in one fresh namespace, with
``parameters`` set right after the cell tagged ``parameters`` (where papermill would inject them).

For tests that check what a notebook computes (the tables it writes), not that it executes in a kernel:
a kernel costs its start and the notebook's imports again (5-8 s of CPU per analysis notebook), where this
process has them already. The smoke run of tests/test_reproduce.py executes every notebook the real way."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path


def run_notebook_here(notebook: Path, parameters: dict) -> str:
    """Execute ``notebook``'s code cells here, from its folder (as papermill does); returns what they
    printed. A cell that raises raises here, its name in the traceback (``<notebook>[cell N]``)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    namespace: dict = {"__name__": "__main__"}
    printed, cwd = io.StringIO(), Path.cwd()
    os.chdir(notebook.parent)
    try:
        with contextlib.redirect_stdout(printed):
            for index, cell in enumerate(cells):
                if cell["cell_type"] != "code":
                    continue
                exec(compile("".join(cell["source"]), f"{notebook.name}[cell {index}]", "exec"), namespace)
                if "parameters" in cell.get("metadata", {}).get("tags", []):
                    namespace.update(parameters)
    finally:
        os.chdir(cwd)
    return printed.getvalue()
