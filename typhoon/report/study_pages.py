"""What a study puts on its pages, as the study's policy says (:class:`typhoon.runner.policy.StudyPolicy.pages`):
the Summary that leads its report (two section titles and the HTML under them) and its block of the results page
(the markers and the Markdown between them). The report and the results page are handed one; they never guess
the kind of study from the files a folder holds.

- :data:`CLAIMS`: a reference run's grid, the paper's claims checked (:func:`typhoon.report.summary_html.findings_html`);
- :data:`SCHEDULES`: a grid of mask schedules, each against the fixed rate;
- :data:`SEQUENTIAL`: a pre-registered sequential design's verdicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from typhoon.report import results_readme as readme
from typhoon.report import summary_html


@dataclass(frozen=True)
class StudyPages:
    """A study's Summary in its report and its block on the results page (see the module docstring).

    ``titles``: the Summary's two sections; ``summary_html(out_dir)``: the HTML of the first; ``markers``: the
    block's shared markers on the results page; ``own_kind``: the kind of its own markers, where a page holds a
    block per folder (:func:`typhoon.report.results_readme.own_markers`; None: always the shared ones);
    ``markdown(out_dir, page_dir)``: the block's text."""

    titles: tuple[str, str]
    summary_html: Callable[[Path], str]
    markers: tuple[str, str]
    own_kind: str | None
    markdown: Callable[..., str]


def _claims() -> StudyPages:

    return StudyPages(("The paper’s claims", "Headline table"), summary_html.findings_html,
                      (readme.README_BEGIN, readme.README_END), "results", readme.results_markdown)


def _schedules() -> StudyPages:

    return StudyPages(("Schedules against fixed", "Headline table"), summary_html.schedule_findings_html,
                      (readme.SCHEDULES_BEGIN, readme.SCHEDULES_END), None, readme.schedules_markdown)


def _sequential() -> StudyPages:

    return StudyPages(("The verdicts", "Numerics by seed"), summary_html.sequential_findings_html,
                      (readme.DECISIVE_BEGIN, readme.DECISIVE_END), "decisive", readme.decisive_markdown)


#: The pages of each kind of study.
PAGES = {"claims": _claims, "schedules": _schedules, "sequential": _sequential}


def pages_of(name: str) -> StudyPages:
    """The pages of the study kind ``name`` (a key of :data:`PAGES`)."""
    return PAGES[name]()
