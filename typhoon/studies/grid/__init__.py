"""The grid study: a profile's grid of cells, then its walkthroughs, analysis notebooks and report. One folder: its
policy of the loop (``policy``), its analysis after the cells (``analysis``), its pages (``pages``: the paper's
claims checked, its Results block), its reanalyse (``reanalyse``) and what the registry knows of it (``study``).
Lazy (PEP 562): the registry reads it without pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    from typhoon.studies.grid.analysis import AnalysisFailed, run_analysis
    from typhoon.studies.grid.pages import PAGES, README_BEGIN, README_END, findings_html, results_markdown
    from typhoon.studies.grid.policy import FixedGrid, against_reference, check_analysis_settings
    from typhoon.studies.grid.reanalyse import reanalyse_grid, recorded_configs
    from typhoon.studies.grid.study import STUDY, Grid

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
