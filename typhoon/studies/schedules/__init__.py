"""The schedules study: a grid of mask schedules, each against the fixed rate. One folder: its registered
hypothesis and comparisons (``analysis``), its pages (``pages``) and what the registry knows of it (``study``); its
cells run as the grid study's do. Lazy (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    from typhoon.studies.schedules import analysis
    from typhoon.studies.schedules.pages import (
        PAGES,
        SCHEDULES_BEGIN,
        SCHEDULES_END,
        schedule_findings_html,
        schedules_markdown,
    )
    from typhoon.studies.schedules.study import STUDY, Schedules

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
