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

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    # Modules other stages use whole: their names read qualified (``plugins.load``), or one of them is the module's
    # own name (``task_saliency.task_saliency``).
    from typhoon.masking import plugins, task_saliency
    from typhoon.masking.across_ranks import rank_and_size, shared_update
    from typhoon.masking.base import IGNORE_INDEX, MaskingStrategy, corrupt, load_state, maskable_positions
    from typhoon.masking.calibration import (
        BudgetSolver,
        ClosedFormBudget,
        budget_moved,
        budget_rule,
        calibrate,
        calibrate_budget,
        kl_to_uniform,
        masked_distribution_kl,
        preference,
        realised_rate,
        spread,
    )
    from typhoon.masking.params import (
        ALIASES,
        BASE_PARAMS,
        CALIBRATIONS,
        CONFIG_PARAMS,
        CORRUPTIONS,
        DEFAULT_SCHEDULE,
        PLUGIN_STRATEGIES,
        SALIENCY_SOURCES,
        SCHEDULES,
        STRATEGY_PARAMS,
        Param,
        arm_label,
        check_params,
        declared_params,
        ignored_parameters,
        inactive_parameters,
        parameters_of,
        resolve_alias,
        strategy_help,
        strategy_names,
        uses_task_saliency,
        with_strategy_params,
    )
    from typhoon.masking.random import RandomMasking, random_token_mask
    from typhoon.masking.registry import STRATEGIES, get_strategy
    from typhoon.masking.saliency import TyphoonMasking, batch_weight_estimate, ema_update
    from typhoon.masking.saliency_probe import SaliencyProbe
    from typhoon.masking.saliency_source import SaliencySource, saliency_kind
    from typhoon.masking.schedules import (
        FixedMaskingRatio,
        FixedVisibleCount,
        Schedule,
        UniformMaskingRatio,
        min_visible_count,
        require_sequence_length,
        sample_rates,
        sample_visible_sets,
        with_full_mask,
    )
    from typhoon.masking.span import SpanMasking, sample_span_lengths, span_length_pmf, span_mask
    from typhoon.masking.whole_word import WholeWordMasking, whole_word_mask

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
