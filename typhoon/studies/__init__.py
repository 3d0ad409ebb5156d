"""The studies of the bundle, one folder each (``typhoon/studies/<name>/``): its design, policy, cells, analysis,
tables, report section and README answer (:mod:`typhoon.studies.study`). The registry (:mod:`typhoon.studies.
registry`) says which study a profile, a results folder or a command belongs to; the engine and the command line
ask it. Lazy (PEP 562): the command line builds its parser from the studies without their heavy modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    from typhoon.studies.profile_study import (
        ReproduceOptions,
        pages_of_folder,
        reanalyse,
        reproduce,
        run_on_cluster,
    )
    from typhoon.studies.registry import STUDIES, add_commands, study_named, study_of_folder, study_of_profile
    from typhoon.studies.study import Study

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
