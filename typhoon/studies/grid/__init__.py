"""The grid study: a profile's grid of cells, then its walkthroughs, analysis notebooks and report. One folder: its
policy of the loop (``policy``), its analysis after the cells (``analysis``), its pages (``pages``: the paper's
claims checked, its Results block), its reanalyse (``reanalyse``) and what the registry knows of it (``study``).
Lazy (PEP 562): the registry reads it without pandas.
"""

from __future__ import annotations

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["FixedGrid", "against_reference", "check_analysis_settings"], "policy"),
    **dict.fromkeys(["AnalysisFailed", "run_analysis"], "analysis"),
    **dict.fromkeys(["PAGES", "README_BEGIN", "README_END", "findings_html", "results_markdown"], "pages"),
    **dict.fromkeys(["recorded_configs", "reanalyse_grid"], "reanalyse"),
    **dict.fromkeys(["Grid", "STUDY"], "study"),
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_face(__name__, _HOMES)
