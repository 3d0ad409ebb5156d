"""The sequential study: a profile's pre-registered sequential design (the decisive studies), seeds added look by
look until every comparison is decided or at its cap. One folder: its design read and checked (``design``), the
study run on its records (``decisive``: each look analysed, the next planned, its tables), the checks behind each
verdict (``checks``), its figure (``figure``), its policy of the loop (``policy``), its pages (``pages``), the
README's answer table (``answer``) and what the registry and the command line know of it (``study``). Lazy.
"""

from __future__ import annotations

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["describe_design", "study_design"], "design"),
    **dict.fromkeys(["SequentialDesign", "rewrite_tables_and_report", "write_report", "write_study_manifest"], "policy"),
    **dict.fromkeys(["DECISIVE_BEGIN", "DECISIVE_END", "PAGES", "decisive_markdown", "sequential_findings_html"],
                    "pages"),
    **dict.fromkeys(["ANSWER_BEGIN", "ANSWER_END", "answer_markdown", "update_answer"], "answer"),
    **dict.fromkeys(["STUDY", "Sequential"], "study"),
}
_NAMESPACES = ("checks", "decisive", "design", "figure")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
