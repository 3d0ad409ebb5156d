"""Which tokens to mask: one registry of MLM masking strategies with a shared interface.

``get_strategy(name, **params)`` builds a validated strategy; see docs/CONTRACTS.md for the
interface (``select``, ``__call__``, ``prepare``, ``update``, state). Names: ``random``,
``whole_word``, ``span``, ``typhoon`` (saliency masking, :mod:`.saliency`; calibration via
``calibration=...``, saliency source via ``saliency=...``), and the aliases ``typhoon_minmax``,
``typhoon_rank``, ``typhoon_softmax`` and ``typhoon_task`` (min-max calibration of the task-loss
saliency, :mod:`typhoon.masking.task_saliency`). Each strategy class declares its parameters (``PARAMS``);
:func:`parameters_of` lists them for a name, :func:`inactive_parameters` those that given values make
irrelevant (left out of a run's identity).

Other stages take these names from here (``from typhoon.masking import get_strategy``): the strategies
and their parameters' declarations, the calibration, the mask schedules (``schedules``, shared with the
theory), where a run's saliency comes from (``saliency_source``) and one state shared by the ranks of a
data-parallel run (``across_ranks``: ``shared_update``). Two modules are used whole: ``plugins``
(``plugins.load``, a strategy of your own) and ``task_saliency`` (named by its function).

The package loads lazily: a name is imported from its module on first use, so the torch-free
declarations in :mod:`typhoon.masking.params` (the CLI's help reads them) load without the strategies
(torch).
"""

from __future__ import annotations

from typhoon import lazy_face

# Each public name and the module of this package that defines it.
_HOMES = {
    **dict.fromkeys(["ALIASES", "BASE_PARAMS", "CALIBRATIONS", "CONFIG_PARAMS", "CORRUPTIONS", "DEFAULT_SCHEDULE",
                     "PLUGIN_STRATEGIES", "Param", "SALIENCY_SOURCES", "SCHEDULES", "STRATEGY_PARAMS", "arm_label",
                     "check_params", "declared_params", "ignored_parameters", "inactive_parameters", "parameters_of",
                     "resolve_alias", "strategy_help", "strategy_names", "uses_task_saliency",
                     "with_strategy_params"], "params"),
    **dict.fromkeys(["BudgetSolver", "ClosedFormBudget", "budget_moved", "budget_rule", "calibrate", "calibrate_budget",
                     "kl_to_uniform", "masked_distribution_kl", "preference", "realised_rate", "spread"], "calibration"),
    **dict.fromkeys(["IGNORE_INDEX", "MaskingStrategy", "corrupt", "load_state", "maskable_positions"], "base"),
    **dict.fromkeys(["TyphoonMasking", "batch_weight_estimate", "ema_update"], "saliency"),
    **dict.fromkeys(["SaliencyProbe"], "saliency_probe"),
    **dict.fromkeys(["STRATEGIES", "get_strategy"], "registry"),
    **dict.fromkeys(["RandomMasking", "random_token_mask"], "random"),
    **dict.fromkeys(["SpanMasking", "sample_span_lengths", "span_length_pmf", "span_mask"], "span"),
    **dict.fromkeys(["WholeWordMasking", "whole_word_mask"], "whole_word"),
    **dict.fromkeys(["FixedMaskingRatio", "FixedVisibleCount", "Schedule", "UniformMaskingRatio", "min_visible_count",
                     "require_sequence_length", "sample_rates", "sample_visible_sets", "with_full_mask"], "schedules"),
    **dict.fromkeys(["SaliencySource", "saliency_kind"], "saliency_source"),
    **dict.fromkeys(["rank_and_size", "shared_update"], "across_ranks"),
}
# Modules other stages use whole: their names read qualified (``plugins.load``), or one of them is the module's
# own name (``task_saliency.task_saliency``).
_NAMESPACES = ("plugins", "task_saliency")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
