"""What a run leaves on disk: its record and lock, the results table, reuse of equal records, the numerics
it ran in and the output folder's manifest. Other stages take these names from here (``from typhoon.records
import is_complete``): the tables' columns (``schema``), a record written, read and judged complete
(``run_record``), the locks (``locks``), the rows of results.csv and the status table (``result_rows``), an
equal record reused (``reuse``), the numerics of a run (``run_numerics``) and the manifest and git state of an
output folder (``provenance``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562):
# importing any module of the stage runs this file first, and the command line imports the locks at start-up
# (no dependency), which must not pay for pandas (about 0.4 s), which run_record and the modules after it
# import.
if TYPE_CHECKING:
    from typhoon.records.locks import (
        LockedError,
        check_folder_free,
        output_folder_lock,
        pid_alive,
        record_lock,
        remove_stale_lock,
    )
    from typhoon.records.provenance import (
        check_git_repo,
        close_invocation,
        commit_cell,
        commit_paths,
        git_state,
        invocation,
        invocation_clock,
        invocations,
        now,
        read_manifest,
        record_stopped_invocation,
        study_profile,
        trained_at_line,
        write_manifest,
    )
    from typhoon.records.result_rows import collect_results, result_row, status_row
    from typhoon.records.reuse import finished_record_of, reuse_equal_records, reuse_record
    from typhoon.records.run_numerics import (
        BitSource,
        Numerics,
        bit_source_of_metrics,
        numerics_of_metrics,
        numerics_of_run,
        record_numerics,
        record_numerics_detail,
        results_numerics,
    )
    from typhoon.records.run_record import (
        RunRecord,
        is_complete,
        read_json,
        read_record,
        record_status,
        resume_state_path,
        why_incomplete,
        write_record,
    )
    from typhoon.records.schema import LOSS_COLUMNS, RESULT_COLUMNS, RUN_KEYS, STATUS_COLUMNS

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
