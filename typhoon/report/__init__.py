"""What a reader sees: figures, the HTML report and its browser check, the README results block, and the
tables and demos the setup and walkthrough notebooks show. Other stages take these names from here (``from
typhoon.report import render_report``): the report built (``html``), checked in a browser (``browser``), the
README and results page rewritten (``results_readme``), the run curves drawn (``figures``) and the
kl-original study's KL curve (``masking_figures``).
"""

from __future__ import annotations

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and the command line's check-report (the browser) must not pay
# for matplotlib and pandas, which the figures and the report import.
_HOMES = {
    **dict.fromkeys(["check_page", "report_page"], "browser"),
    **dict.fromkeys(["plot_run_curves"], "figures"),
    **dict.fromkeys(["render_report"], "html"),
    **dict.fromkeys(["update_answer", "update_readme"], "results_readme"),
    **dict.fromkeys(["StudyPages", "pages_of"], "study_pages"),
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_face(__name__, _HOMES)
