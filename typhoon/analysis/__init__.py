"""The statistics: one module per question (run summaries, paired comparisons, significance tests,
power), the paper's claims, the reference comparison, the sequential and decisive studies, the KL measures
every study shares (``kl``: the KL units, the budget spread of Typhoon's masking) and the schedule theory
(``identifiability``). Other stages take these names from here (``from typhoon.analysis import
ok_runs``): the results read and summarised (``run_summary``), a finished run's tables read back with its
headline table (``output_tables``), the
comparison with a reference run (``reference``) and Markdown tables; the shared statistics are used whole, as
modules (``paired``, ``pairwise``, ``paper_claims``, ``sequential``, ``significance`` ...); the two packages ``kl`` and ``identifiability`` each have a
face of their own (``from typhoon.analysis.kl import kl_definitions``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562):
# importing any module of the stage runs this file first, and the command line must not pay for pandas and
# scipy.
if TYPE_CHECKING:
    # Modules other stages use whole: their names read qualified, one question each (``paper_claims.headline``,
    # ``sequential.boundaries``); ``kl`` and ``identifiability`` are faces of their own.
    from typhoon.analysis import (
        bottleneck_verdict,
        identifiability,
        kl,
        paired,
        pairwise,
        paper_claims,
        run_summary,
        seed_budget,
        sequential,
        significance,
    )
    from typhoon.analysis.output_tables import Tables, headline_table, holm_caption, read_tables
    from typhoon.analysis.paired import tost_power
    from typhoon.analysis.reference import compare_with_reference, no_reference_note, reference_for
    from typhoon.analysis.run_summary import (
        arms,
        degenerate_rate,
        load_loss_curves,
        margin_text,
        metric_of,
        ok_runs,
        require_plottable,
        strategy_order,
        summarize,
    )
    from typhoon.analysis.significance import NULL_POWER_DZ, POWER_TARGET, tost_paired
    from typhoon.analysis.stats_tables import markdown_table

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
