"""The studies of the bundle, one folder each (``typhoon/studies/<name>/``): its design, policy, cells, analysis,
tables, report section and README answer (:mod:`typhoon.studies.study`). The registry (:mod:`typhoon.studies.
registry`) says which study a profile, a results folder or a command belongs to; the engine and the command line
ask it. Lazy (PEP 562): the command line builds its parser from the studies without their heavy modules.
"""

from __future__ import annotations

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["Study"], "study"),
    **dict.fromkeys(["STUDIES", "add_commands", "study_named", "study_of_folder", "study_of_profile"], "registry"),
    **dict.fromkeys(["ReproduceOptions", "pages_of_folder", "reanalyse", "reproduce", "run_on_cluster"], "profile_study"),
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_face(__name__, _HOMES)
