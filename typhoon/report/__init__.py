"""What a reader sees: figures, the HTML report and its browser check, the README results block, and the
tables and demos the setup and walkthrough notebooks show. Other stages take these names from here (``from
typhoon.report import render_report``): the report built (``html``), checked in a browser (``browser``), the
results page's blocks rewritten (``results_readme``), the run curves drawn (``figures``), and the parts each
study's pages are made of (``summary_html``, ``results_readme``, ``study_pages``).
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
    **dict.fromkeys(["RESULTS_PAGE", "own_markers", "provenance_line", "readme_block", "readme_block_in",
                     "rewrite_block", "shown_folder", "update_readme"], "results_readme"),
    **dict.fromkeys(["frame_html", "runs_section_html", "untestable_html"], "summary_html"),
    **dict.fromkeys(["markdown_html"], "notebook_html"),
    **dict.fromkeys(["StudyPages"], "study_pages"),
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_face(__name__, _HOMES)
