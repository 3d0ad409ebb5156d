"""The schedules study: a grid of mask schedules, each against the fixed rate. One folder: its registered
hypothesis and comparisons (``analysis``), its pages (``pages``) and what the registry knows of it (``study``); its
cells run as the grid study's do. Lazy (PEP 562).
"""

from __future__ import annotations

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["PAGES", "SCHEDULES_BEGIN", "SCHEDULES_END", "schedule_findings_html", "schedules_markdown"], "pages"),
    **dict.fromkeys(["STUDY", "Schedules"], "study"),
}
_NAMESPACES = ("analysis",)
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
