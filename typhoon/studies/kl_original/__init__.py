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

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["BASELINE", "UNITS", "change_direction", "identical_states", "paper_kl", "rate_table",
                     "read_row_states", "rows_not_yet_run", "rows_table", "t_interval"], "rows"),
    **dict.fromkeys(["CURVE_FIGURE", "END_OF_EPOCH", "TRACE_MEAN", "TRACE_READING", "curve_change", "curve_levels",
                     "curve_trend", "read_curves", "read_traces", "readings", "run_power_laws", "trace_means",
                     "trace_spread"], "curve"),
    **dict.fromkeys(["decisive_margins_and_sds", "finetune_table"], "finetune"),
    **dict.fromkeys(["identity_table", "predictions"], "verdicts"),
    **dict.fromkeys(["measured_addendum", "same_states"], "as_measured"),
    **dict.fromkeys(["addendum_predictions", "second_addendum_tables"], "second_addendum"),
    **dict.fromkeys(["BUDGET_2023", "answer", "study_tables", "write_report"], "report"),
    **dict.fromkeys(["KlOriginalCurve", "KlOriginalFinetune", "KlOriginalRows", "write_tables"], "policy"),
    **dict.fromkeys(["check_curve", "check_curve_runs", "check_row_states", "curve_config", "row_config"], "runs"),
    **dict.fromkeys(["plot_kl_curve"], "figure"),
    **dict.fromkeys(["STUDY"], "commands"),
}
_NAMESPACES = ("design",)
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
