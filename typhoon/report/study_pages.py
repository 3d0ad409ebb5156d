"""What a study puts on its pages (:class:`StudyPages`): the Summary that leads its report (two section titles and
the HTML under them) and its block of the results page (the markers and the Markdown between them). Each study
makes its own (``typhoon/studies/<name>/pages.py``); the report and the results page are handed one and never guess
the kind of study from the files a folder holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


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
