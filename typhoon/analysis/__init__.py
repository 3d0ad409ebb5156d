"""The statistics: one module per question (run summaries, paired comparisons, significance tests,
power), the budget spread of Typhoon's masking, the paper's claims, the reference comparison, the
sequential and decisive studies, and the schedule theory (identifiability). Other stages take these names
from here (``from typhoon.analysis import ok_runs``): the results read and summarised (``run_summary``),
the comparison with a reference run (``reference``), the KL units, the KL-gap table and Markdown tables.
Each study is used whole, as a module: ``decisive``, ``paper_claims``, ``schedule_study``, ``kl_original``
with its design ``kl_original_design``, the KL-gap study's causes ``kl_gap_causes``, and the schedule
theory ``identifiability`` (its own face).
"""

from __future__ import annotations

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and the command line reads the studies' designs
# (kl_original_design, kl_gap_causes: no dependency), which must not pay for pandas and scipy.
_HOMES = {
    **dict.fromkeys(["arms", "degenerate_rate", "load_loss_curves", "margin_text", "metric_of", "ok_runs",
                     "require_plottable", "strategy_order", "summarize"], "run_summary"),
    **dict.fromkeys(["NULL_POWER_DZ", "POWER_TARGET"], "significance"),
    **dict.fromkeys(["compare_with_reference", "no_reference_note", "reference_for"], "reference"),
    **dict.fromkeys(["kl_definitions", "rate_spread"], "kl_units"),
    **dict.fromkeys(["kl_gap_table"], "kl_gap"),
    **dict.fromkeys(["markdown_table"], "stats_tables"),
}
# Modules other stages use whole: a study's names read qualified (``decisive.answer``, ``schedule_study.headline``
# and ``paper_claims.headline`` are two questions), and a design is a set of constants (``kl_original_design.SEEDS``).
_NAMESPACES = ("decisive", "identifiability", "kl_gap_causes", "kl_original", "kl_original_design", "paper_claims",
               "schedule_study")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
