"""The kl-original study: the paper's 2023 code's calibration rules, one at a time and together, its long MLM phase
and the fine-tuned comparison, measured under every definition of the KL (:mod:`typhoon.analysis.kl.units`). One
folder: its registered design (``design``: rows, addenda, curves, fine-tuned seeds), its runs (``runs``: configs,
folders and the checks of a curve), its cells (``cells``: a curve run's next epochs; its rows' states are the
KL-gap study's cells), its policies (``policy``), its analysis and tables (``rows``, ``curve``, ``finetune``,
``verdicts``, ``as_measured``, ``second_addendum``), its README (``report``) and its command (``commands``:
``python -m typhoon kl-original``). Lazy (PEP 562): the command line reads the design and adds the command
without pandas or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    from typhoon.studies.kl_original import design
    from typhoon.studies.kl_original.as_measured import measured_addendum, same_states
    from typhoon.studies.kl_original.commands import STUDY
    from typhoon.studies.kl_original.curve import (
        CURVE_FIGURE,
        END_OF_EPOCH,
        TRACE_MEAN,
        TRACE_READING,
        curve_change,
        curve_levels,
        curve_trend,
        read_curves,
        read_traces,
        readings,
        run_power_laws,
        trace_means,
        trace_spread,
    )
    from typhoon.studies.kl_original.figure import plot_kl_curve
    from typhoon.studies.kl_original.finetune import decisive_margins_and_sds, finetune_table
    from typhoon.studies.kl_original.policy import (
        KlOriginalCurve,
        KlOriginalFinetune,
        KlOriginalRows,
        write_tables,
    )
    from typhoon.studies.kl_original.report import BUDGET_2023, answer, study_tables, write_report
    from typhoon.studies.kl_original.rows import (
        BASELINE,
        UNITS,
        change_direction,
        identical_states,
        paper_kl,
        rate_table,
        read_row_states,
        rows_not_yet_run,
        rows_table,
        t_interval,
    )
    from typhoon.studies.kl_original.runs import (
        check_curve,
        check_curve_runs,
        check_row_states,
        curve_config,
        row_config,
    )
    from typhoon.studies.kl_original.second_addendum import addendum_predictions, second_addendum_tables
    from typhoon.studies.kl_original.verdicts import identity_table, predictions

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
