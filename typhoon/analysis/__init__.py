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

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and the command line must not pay for pandas and scipy.
_HOMES = {
    **dict.fromkeys(["arms", "degenerate_rate", "load_loss_curves", "margin_text", "metric_of", "ok_runs",
                     "require_plottable", "strategy_order", "summarize"], "run_summary"),
    **dict.fromkeys(["NULL_POWER_DZ", "POWER_TARGET", "tost_paired"], "significance"),
    **dict.fromkeys(["tost_power"], "paired"),
    **dict.fromkeys(["compare_with_reference", "no_reference_note", "reference_for"], "reference"),
    **dict.fromkeys(["markdown_table"], "stats_tables"),
    **dict.fromkeys(["Tables", "headline_table", "holm_caption", "read_tables"], "output_tables"),
}
# Modules other stages use whole: their names read qualified, one question each (``paper_claims.headline``,
# ``sequential.boundaries``); ``kl`` and ``identifiability`` are faces of their own.
_NAMESPACES = ("bottleneck_verdict", "identifiability", "kl", "paired", "pairwise", "paper_claims", "run_summary", "seed_budget", "sequential",
               "significance")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
