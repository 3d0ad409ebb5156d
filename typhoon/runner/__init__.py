"""Running the study: the grid of cells and its analysis notebooks, the time estimate, stopping and
resuming, cluster executors and the progress monitor. Other stages (the command line, ``__main__``) take
these names from here (``from typhoon.runner import stop_on_signals``): how a stop is handled (``stop``),
where a study's cells run (``executor_options``), the one loop (``study``), what a study is to it (``policy``,
``cells``) and the notebooks a study executes (``notebooks``). ``dask_executor`` is used whole. The engine names no
study: the studies (``typhoon.studies``) use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562):
# importing any module of the stage runs this file first, and the command line imports stop and options at
# start-up (no dependency), which must not pay for the grid (pandas, the report) or the workers.
if TYPE_CHECKING:
    # Modules other stages use whole, their names read qualified (``estimate.estimate_grid``, ``cluster.describe``).
    from typhoon.runner import cluster, dask_executor, estimate
    from typhoon.runner.cells import TRAIN, Cell, CellKind, cell_is_done, cell_row, error_line
    from typhoon.runner.executor import CellExecutor
    from typhoon.runner.executor_options import (
        add_executor_arguments,
        check_executor_arguments,
        checked_execution,
        cluster_spec,
        execution_overrides,
        run_policy,
    )
    from typhoon.runner.notebooks import (
        ANALYSIS_NOTEBOOKS,
        REFERENCE_NOTEBOOK,
        AnalysisNotebook,
        NotebookFailed,
        as_file_system_error,
        execute_for,
        notebooks_dir,
        pair_notebooks,
    )
    from typhoon.runner.policy import Finished, Look, OneLook, StudyPolicy, failed, preflight, status_table
    from typhoon.runner.progress import RunLog, say
    from typhoon.runner.stop import (
        as_interrupted,
        exit_finished,
        exit_now_if_threads_linger,
        exit_stopped,
        remove_empty_folders,
        resume_command,
        stop_on_signals,
    )
    from typhoon.runner.study import Summary, run_study

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
