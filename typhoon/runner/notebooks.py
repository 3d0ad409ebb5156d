"""The notebooks a study executes with papermill: where they are, the walkthrough of each backbone × task and
the analysis notebooks, executing one into its place, and scrubbing an executed copy of machine paths."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from typhoon import atomic, paths
from typhoon.config import RunConfig
from typhoon.runner import stop

REPO_NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


KERNEL = "python3"


class QuietShutdownKernelManager(AsyncKernelManager):
    """jupyter_client interrupts (SIGINT) every kernel before shutting it down, in case it is busy. Our
    kernels are idle by then -- papermill shuts them down after the last cell, and a stopped grid kills
    them itself (:mod:`typhoon.runner.stop`) -- but with two kernels at once one of them would log
    "ERROR | KeyboardInterrupt caught in kernel" for a run that went well. So no interrupt at shutdown."""

    async def _async_interrupt_kernel(self) -> None:
        if self.shutting_down:
            return
        await super()._async_interrupt_kernel()


class QuietOnAStop(logging.Filter):
    """Drops papermill's (and nbclient's, which logs through papermill's logger) lines while a stop is under
    way: the stop kills the kernels itself, so "Kernel died while waiting for execute reply." is no news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not stop.stopping()


PAPERMILL_LOG = logging.getLogger("papermill")
if not any(isinstance(f, QuietOnAStop) for f in PAPERMILL_LOG.filters):  # once, even if this module is reloaded
    PAPERMILL_LOG.addFilter(QuietOnAStop())


# How every notebook of the bundle is executed: the venv's python3 kernel, quiet at shutdown, its
# application log at ERROR (ipykernel warns at every start that it talks to papermill "over TCP without
# encryption": here that is the loopback, between two of the user's own processes).
PAPERMILL_OPTIONS = {"kernel_name": KERNEL, "kernel_manager_class": QuietShutdownKernelManager,
                     "extra_arguments": ["--IPKernelApp.log_level=ERROR"], "progress_bar": False}


@dataclass(frozen=True)
class AnalysisNotebook:
    """A notebook the grid executes after the runs (a walkthrough or an analysis of the results): every
    one takes ``out_dir`` and ``profile``, and ``settings`` names the profile's analysis settings
    (``[<profile>.analysis]``) it takes as parameters. The report shows them in this order."""

    name: str
    settings: tuple[str, ...] = ()


ANALYSIS_NOTEBOOKS = (
    AnalysisNotebook("00_setup.ipynb", settings=("quick",)),
    AnalysisNotebook("01_masking_walkthrough.ipynb", settings=("quick",)),
    AnalysisNotebook("20_statistics.ipynb", settings=("margin",)),  # a TOST margin of the profile's own (default profiles.task_margins)
    AnalysisNotebook("30_budget_spread.ipynb"),
    AnalysisNotebook("40_mask_schedules.ipynb", settings=("quick",)),
)


# Run once the others have finished (it compares their tables with the reference run's); the report shows
# it after the statistics.
REFERENCE_NOTEBOOK = AnalysisNotebook("25_reference.ipynb")

# One per backbone × task of a grid (its parameters ``task`` and ``backbone``): that pair's cells, strategy by
# strategy and seed by seed; opened by hand it trains the pair's missing cells.
PAIR_NOTEBOOK = AnalysisNotebook("10_walkthrough.ipynb")


def pair_notebooks(configs: list[RunConfig]) -> list[tuple[AnalysisNotebook, dict, str]]:
    """The walkthroughs of a grid: for each (task, backbone) of ``configs`` in grid order, the notebook, its
    parameters (the batch trained the cells: it shows them, trains nothing) and the name of its executed copy
    (:func:`typhoon.paths.pair_notebook`)."""
    pairs = dict.fromkeys((c.task, c.backbone) for c in configs)
    return [(PAIR_NOTEBOOK, {"task": task, "backbone": backbone, "train_missing": False},
             paths.pair_notebook(task, backbone)) for task, backbone in pairs]


def notebooks_dir() -> Path:
    """Where the notebooks are: ``$TYPHOON_NOTEBOOKS`` or the repository's ``notebooks/``."""
    path = Path(os.environ.get("TYPHOON_NOTEBOOKS", REPO_NOTEBOOKS))
    names = (PAIR_NOTEBOOK.name, *(nb.name for nb in (*ANALYSIS_NOTEBOOKS, REFERENCE_NOTEBOOK)))
    missing = [n for n in names if not (path / n).is_file()]
    if missing:
        raise FileNotFoundError(f"notebooks {missing} not found in {path} (set TYPHOON_NOTEBOOKS)")
    return path


def execute_notebook(source: Path, target: Path, parameters: dict) -> None:
    """Execute a notebook with papermill; the executed copy appears at ``target`` only when done."""
    import papermill

    paths.absolute_path_variables()  # the kernel starts in the notebook's folder and inherits them
    if stop.stopping():  # queued before a stop: no kernel starts after it, no temp file is made
        raise stop.Interrupted()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.stem}.tmp-{os.getpid()}-{time.monotonic_ns()}.ipynb")
    with stop.temp_file(tmp):  # a stop that ends the process while this thread still waits removes it
        try:
            papermill.execute_notebook(str(source), str(tmp), parameters=parameters, cwd=str(source.parent),
                                       **PAPERMILL_OPTIONS)
        finally:
            if tmp.exists() and stop.stopping():
                tmp.unlink()  # a stopped notebook is no result: the rerun executes it again
            elif tmp.exists():
                os.replace(tmp, target)  # executed (or failed-at-a-cell) copy, for reading the traceback


class NotebookFailed(RuntimeError):
    """A notebook that raised in a cell: which notebook, which cell, the exception's class and message.

    ``ename`` and ``evalue`` are papermill's names for the kernel's exception (:func:`as_file_system_error`
    reads them); ``executed`` is the executed copy, which shows the traceback at that cell."""

    def __init__(self, executed: Path, cell: str, ename: str, evalue: str):
        self.executed, self.cell, self.ename, self.evalue = executed, cell, ename, evalue
        message = " ".join(str(evalue).split())  # one line: the log and the terminal show it whole
        super().__init__(f"notebooks/{executed.name}, cell {cell}: {ename}: {message}")


def execute_for(out_dir: Path, nb_dir: Path, name: str, parameters: dict, target_name: str | None = None) -> Path:
    """Execute notebook ``name`` of ``nb_dir`` on an output folder into ``<out_dir>/notebooks/<target_name>``
    (default: its own name), made fit to share (:func:`scrub_notebook`, also when it failed at a cell).
    A cell that raised is :class:`NotebookFailed`, the cell named as the executed copy shows it: ``In [n]``."""
    from papermill.exceptions import PapermillExecutionError

    target = Path(out_dir) / "notebooks" / (target_name or name)
    try:
        execute_notebook(Path(nb_dir) / name, target, parameters)
    except PapermillExecutionError as err:  # its own message is the kernel's whole traceback, in colour codes
        cell = f"In [{err.exec_count}]" if err.exec_count else f"{err.cell_index + 1}"  # papermill adds cells above
        raise NotebookFailed(target, cell, err.ename, err.evalue) from err
    finally:
        if target.is_file():
            scrub_notebook(target, out_dir)
    return target


def scrub_notebook(path: Path, out_dir: Path) -> None:
    """Rewrite an executed notebook with every absolute path of this machine made relative
    (:func:`typhoon.paths.redact`): in its outputs, the parameters papermill injected and papermill's
    metadata. Committed copies must not carry one machine's folders. The replacements are plain
    relative paths, so the JSON stays valid (checked before the file is replaced). The injected
    ``out_dir`` names the output folder from the notebook's own folder (e.g. ``..``), where JupyterLab and
    papermill execute it, so the copy can be re-run where it lies."""
    import nbformat

    text = paths.redact(path.read_text(encoding="utf-8"), out_dir)
    notebook = nbformat.reads(text, as_version=4)  # still a notebook
    if point_out_dir_at(notebook, paths.notebook_out_dir(path, out_dir)):
        text = nbformat.writes(notebook)
    atomic.atomic_write_text(path, text)


INJECTED_OUT_DIR = re.compile(r'^out_dir = "\."$', re.MULTILINE)  # the output folder, once redacted


def point_out_dir_at(notebook, relative: str) -> bool:
    """Set the ``out_dir`` papermill injected (redacted to ``"."``) to ``relative``, in the injected cell and
    papermill's metadata; False when there is none to change."""
    cells = [cell for cell in notebook.cells if "injected-parameters" in cell.get("metadata", {}).get("tags", [])]
    changed = False
    for cell in cells:
        source = INJECTED_OUT_DIR.sub(f"out_dir = {json.dumps(relative)}", cell.source)
        changed, cell.source = changed or source != cell.source, source
    parameters = notebook.metadata.get("papermill", {}).get("parameters", {})
    if parameters.get("out_dir") == ".":
        parameters["out_dir"], changed = relative, True
    return changed


_ERRNO_IN_MESSAGE = re.compile(r"\[Errno (\d+)\] ([^:']+)(?::\s*'(.*)')?")


def as_file_system_error(error: BaseException) -> OSError | None:
    """The file-system error (:data:`typhoon.paths.FILE_SYSTEM_ERRNOS`) behind a failure, if that is what it was:
    raised here, or in a notebook's kernel (papermill reports it as text, e.g. ``[Errno 28] No space left on
    device: '/out/figures/...'``); else None."""
    if paths.is_file_system_error(error):
        return error
    if getattr(error, "ename", None) in ("OSError", "PermissionError", "NotADirectoryError", "FileExistsError",
                                         "IsADirectoryError"):
        found = _ERRNO_IN_MESSAGE.search(str(getattr(error, "evalue", "")))
        if found:
            os_error = OSError(int(found[1]), found[2].strip(), found[3])
            return os_error if paths.is_file_system_error(os_error) else None
    return None
