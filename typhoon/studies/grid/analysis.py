"""A grid's analysis after its cells: the notebooks executed on the collected results, then the HTML report with the
study's pages (:func:`run_analysis`). Each notebook is its own kernel; those that raise leave the others and the
report, which names them (:class:`AnalysisFailed`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from typhoon.report import StudyPages, render_report
from typhoon.runner import (
    ANALYSIS_NOTEBOOKS,
    REFERENCE_NOTEBOOK,
    AnalysisNotebook,
    NotebookFailed,
    as_file_system_error,
    execute_for,
    pair_notebooks,
)


def run_analysis(out_dir: Path, nb_dir: Path, settings: dict | None = None, profile: str | None = None,
                 on_notebook: Callable[[str], None] | None = None, configs: list | None = None,
                 workers: int = 2, pages: StudyPages | None = None) -> Path:
    """Execute the notebooks on the collected results and render the HTML report.

    First one walkthrough per backbone × task of ``configs`` (:func:`typhoon.runner.notebooks.pair_notebooks`),
    then the analysis notebooks (:data:`ANALYSIS_NOTEBOOKS`); ``settings``: the profile's analysis settings,
    each notebook gets those it declares, and ``profile``; ``on_notebook`` is told each notebook's name as it
    starts. The executed copies land in ``<out_dir>/notebooks/`` with this machine's paths made relative
    (:func:`scrub_notebook`). ``workers`` notebooks run at once: each reads the records and writes its own tables
    and figures, and each pays seconds of kernel start. Then the comparison with the committed reference run
    (:data:`REFERENCE_NOTEBOOK`). A notebook that raised in a cell (:class:`NotebookFailed`) leaves the others
    and the report, which names it; then :class:`AnalysisFailed` is raised. Any other error is raised (the
    first, in notebook order) once all have finished.
    """
    settings = settings or {}

    def execute(nb: AnalysisNotebook, extra: dict | None = None, target_name: str | None = None) -> Path:
        params = {"out_dir": str(out_dir), **({"profile": profile} if profile else {}),
                  **{k: settings[k] for k in nb.settings if k in settings}, **(extra or {})}
        if on_notebook is not None:
            on_notebook(target_name or nb.name)
        return execute_for(out_dir, nb_dir, nb.name, params, target_name)

    pairs = pair_notebooks(configs or [])
    failures: list[NotebookFailed] = []

    def executed_copy(run: Callable[[], Path]) -> Path | None:  # a cell that raised: its copy shows where
        try:
            return run()
        except NotebookFailed as err:
            if as_file_system_error(err) is not None:  # a full disk is no notebook's fault: the grid stops
                raise
            failures.append(err)
            return err.executed if err.executed.is_file() else None

    pool = ThreadPoolExecutor(max_workers=max(1, workers))  # each notebook is its own kernel process
    try:
        futures = [pool.submit(execute, nb, extra, name) for nb, extra, name in pairs]
        futures += [pool.submit(execute, nb) for nb in ANALYSIS_NOTEBOOKS]
        pool.shutdown(wait=True)
    except BaseException:  # a stop: the notebooks not started yet never start
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    executed = [executed_copy(future.result) for future in futures]
    after = [i + 1 for i, path in enumerate(executed) if path is not None and path.name == "20_statistics.ipynb"]
    executed.insert(after[0] if after else len(executed), executed_copy(lambda: execute(REFERENCE_NOTEBOOK)))
    report = render_report(out_dir, [path for path in executed if path is not None], profile, pages=pages,
                           failed=[str(err) for err in failures])
    if failures:
        raise AnalysisFailed(failures, report)
    return report


class AnalysisFailed(RuntimeError):
    """Analysis notebooks that raised in a cell (:class:`NotebookFailed`, in notebook order); the report was
    written all the same, with the others and a line naming each failure."""

    def __init__(self, failures: list[NotebookFailed], report: Path):
        self.failures, self.report = failures, report
        super().__init__("; ".join(map(str, failures)))
