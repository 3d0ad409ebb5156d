"""What a reader sees: figures, the HTML report and its browser check, the README results block, and the
tables and demos the setup and walkthrough notebooks show. Other stages take these names from here (``from
typhoon.report import render_report``): the report built (``html``), checked in a browser (``browser``), the
results page's blocks rewritten (``results_readme``), the run curves drawn (``figures``), and the parts each
study's pages are made of (``summary_html``, ``results_readme``, ``study_pages``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562):
# importing any module of the stage runs this file first, and the command line's check-report (the browser)
# must not pay for matplotlib and pandas, which the figures and the report import.
if TYPE_CHECKING:
    from typhoon.report.browser import check_page, report_page
    from typhoon.report.figures import plot_run_curves
    from typhoon.report.html import render_report
    from typhoon.report.notebook_html import markdown_html
    from typhoon.report.results_readme import (
        RESULTS_PAGE,
        own_markers,
        provenance_line,
        readme_block,
        readme_block_in,
        rewrite_block,
        shown_folder,
        update_readme,
    )
    from typhoon.report.study_pages import StudyPages
    from typhoon.report.summary_html import frame_html, runs_section_html, untestable_html

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
