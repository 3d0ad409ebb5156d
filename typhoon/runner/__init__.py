"""Running the study: the grid of cells and its analysis notebooks, the time estimate, stopping and
resuming, cluster executors and the progress monitor. Other stages (the command line, ``__main__``) take
these names from here (``from typhoon.runner import stop_on_signals``): how a stop is handled (``stop``),
the options of ``reproduce`` and where they run (``options``), and a sequential study's tables rewritten
(``sequential_grid``). Three modules are used whole: ``kl_studies`` (the KL studies' policies of the one
study loop, ``kl_studies.KlOriginalCurve``), ``reanalyse`` and ``dask_executor`` (each named by its function).
"""

from __future__ import annotations

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and the command line imports stop and options at start-up
# (no dependency), which must not pay for the grid (pandas, the report) or the workers.
_HOMES = {
    **dict.fromkeys(["as_interrupted", "exit_finished", "exit_now_if_threads_linger", "exit_stopped", "remove_empty_folders",
                     "resume_command", "stop_on_signals"], "stop"),
    **dict.fromkeys(["ReproduceOptions", "execution_overrides", "run_on_cluster", "run_policy"], "options"),
    **dict.fromkeys(["rewrite_tables_and_report"], "sequential_grid"),
    **dict.fromkeys(["check_curve", "check_curve_runs", "check_row_states"], "kl_runs"),
    **dict.fromkeys(["study_pages_of"], "reanalyse"),
}
# Modules other stages use whole: their names read qualified (``kl_studies.write_tables``), or one of them is the
# module's own name (``reanalyse.reanalyse``).
_NAMESPACES = ("dask_executor", "kl_studies", "reanalyse")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
