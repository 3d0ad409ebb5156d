"""Running the study: the grid of cells and its analysis notebooks, the time estimate, stopping and
resuming, cluster executors and the progress monitor. Other stages (the command line, ``__main__``) take
these names from here (``from typhoon.runner import stop_on_signals``): how a stop is handled (``stop``),
the options of ``reproduce`` and where they run (``options``), and a sequential study's tables rewritten
(``sequential_grid``). Two modules are used whole: ``reanalyse`` and ``dask_executor`` (each named by its
function).
"""

from __future__ import annotations

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and the command line imports stop and options at start-up
# (no dependency), which must not pay for the grid (pandas, the report) or the workers.
_HOMES = {
    **dict.fromkeys(["as_interrupted", "exit_finished", "exit_now_if_threads_linger", "exit_stopped", "remove_empty_folders",
                     "resume_command", "stop_on_signals"], "stop"),
    **dict.fromkeys(["ReproduceOptions", "add_executor_arguments", "check_executor_arguments", "checked_execution",
                     "execution_overrides", "run_on_cluster", "run_policy"], "options"),
    **dict.fromkeys(["rewrite_tables_and_report"], "sequential_grid"),
    **dict.fromkeys(["TRAIN", "Cell", "CellKind", "cell_row", "error_line"], "cells"),
    **dict.fromkeys(["OneLook", "StudyPolicy", "preflight"], "policy"),
    **dict.fromkeys(["RunLog"], "progress"),
    **dict.fromkeys(["study_pages_of"], "reanalyse"),
}
# Modules other stages use whole: one of their names is the module's own (``reanalyse.reanalyse``).
_NAMESPACES = ("dask_executor", "reanalyse")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
