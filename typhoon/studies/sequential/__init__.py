"""The sequential study: a profile's pre-registered sequential design (the decisive studies), seeds added look by
look until every comparison is decided or at its cap. One folder: its design read and checked (``design``), the
study run on its records (``decisive``: each look analysed, the next planned, its tables), the checks behind each
verdict (``checks``), its figure (``figure``), its policy of the loop (``policy``), its pages (``pages``), the
README's answer table (``answer``) and what the registry and the command line know of it (``study``). Lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    from typhoon.studies.sequential import checks, decisive, design, figure
    from typhoon.studies.sequential.answer import ANSWER_BEGIN, ANSWER_END, answer_markdown, update_answer
    from typhoon.studies.sequential.design import describe_design, study_design
    from typhoon.studies.sequential.pages import (
        DECISIVE_BEGIN,
        DECISIVE_END,
        PAGES,
        decisive_markdown,
        sequential_findings_html,
    )
    from typhoon.studies.sequential.policy import (
        SequentialDesign,
        rewrite_tables_and_report,
        write_report,
        write_study_manifest,
    )
    from typhoon.studies.sequential.study import STUDY, Sequential

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
