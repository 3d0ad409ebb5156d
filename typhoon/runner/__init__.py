"""Running the study: the grid of cells and its analysis notebooks, the time estimate, stopping and
resuming, cluster executors and the progress monitor. Other stages (the command line, ``__main__``) take
these names from here (``from typhoon.runner import stop_on_signals``): how a stop is handled (``stop``),
where a study's cells run (``executor_options``), the one loop (``study``), what a study is to it (``policy``,
``cells``) and the notebooks a study executes (``notebooks``). ``dask_executor`` is used whole. The engine names no
study: the studies (``typhoon.studies``) use it.
"""

from __future__ import annotations

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and the command line imports stop and options at start-up
# (no dependency), which must not pay for the grid (pandas, the report) or the workers.
_HOMES = {
    **dict.fromkeys(["as_interrupted", "exit_finished", "exit_now_if_threads_linger", "exit_stopped", "remove_empty_folders",
                     "resume_command", "stop_on_signals"], "stop"),
    **dict.fromkeys(["add_executor_arguments", "check_executor_arguments", "checked_execution", "cluster_spec",
                     "execution_overrides", "run_policy"], "executor_options"),
    **dict.fromkeys(["CellExecutor"], "executor"),
    **dict.fromkeys(["TRAIN", "Cell", "CellKind", "cell_is_done", "cell_row", "error_line"], "cells"),
    **dict.fromkeys(["Finished", "Look", "OneLook", "StudyPolicy", "failed", "preflight", "status_table"], "policy"),
    **dict.fromkeys(["RunLog", "say"], "progress"),
    **dict.fromkeys(["ANALYSIS_NOTEBOOKS", "REFERENCE_NOTEBOOK", "AnalysisNotebook", "NotebookFailed",
                     "as_file_system_error", "execute_for", "notebooks_dir", "pair_notebooks"], "notebooks"),
    **dict.fromkeys(["Summary", "run_study"], "study"),
}
# Modules other stages use whole, their names read qualified (``estimate.estimate_grid``, ``cluster.describe``).
_NAMESPACES = ("cluster", "dask_executor", "estimate")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
