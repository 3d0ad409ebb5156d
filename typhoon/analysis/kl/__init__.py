"""The KL work: how far Typhoon's masking is from uniform masking, and why it is so much closer than the paper's
7e-4 nats/token. One package, one face (other stages import from ``typhoon.analysis.kl``):

- ``units``: every definition of "KL from uniform masking" (per token, per masked token, per sequence; nats,
  bits) and the band's ceiling;
- ``budget_spread``: the budget-spread bottleneck, from a profile's saved masking states (notebook 30);
- ``gap_causes`` and ``gap``: the KL-gap study, its registered causes (light) and its table;
- ``original_design``: the kl-original study's registered design (light: the command line reads it), and its
  tables by concept: ``rows`` (each 2023 rule's states at one MLM epoch, the t interval), ``curve`` (the long
  MLM phase read two ways: end-of-epoch states and trace snapshots), ``finetune`` (the fine-tuned pairs),
  ``verdicts`` (the registered predictions' verdicts) and ``original_report`` (the answer, the README).

The runs are the runner's: the two studies as policies of the one study loop (``runner.kl_studies``). Lazy (PEP 562, ``lazy_face``): the
designs cost no pandas or scipy.
"""

from __future__ import annotations

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["KL_DEFINITIONS", "kl_definitions", "max_band_kl", "rate_spread"], "units"),
    **dict.fromkeys(["PAPER_KL_NATS_PER_TOKEN"], "budget_spread"),
    **dict.fromkeys(["kl_gap_conclusion", "kl_gap_display", "kl_gap_table"], "gap"),
    **dict.fromkeys(["BASELINE", "UNITS", "change_direction", "identical_states", "paper_kl", "rate_table",
                     "read_row_states", "rows_not_yet_run", "rows_table", "t_interval"], "rows"),
    **dict.fromkeys(["CURVE_FIGURE", "END_OF_EPOCH", "TRACE_MEAN", "TRACE_READING", "curve_change", "curve_levels",
                     "curve_trend", "read_curves", "read_traces", "readings", "run_power_laws", "trace_means",
                     "trace_spread"], "curve"),
    **dict.fromkeys(["decisive_margins_and_sds", "finetune_table"], "finetune"),
    **dict.fromkeys(["identity_table", "predictions"], "verdicts"),
    **dict.fromkeys(["BUDGET_2023", "answer", "study_tables", "write_report"], "original_report"),
}
# Modules used whole: the two designs are sets of constants (``original_design.SEEDS``), and notebook 30 reads the
# budget-spread analysis step by step (``budget_spread.calibration_sweep``).
_NAMESPACES = ("budget_spread", "gap_causes", "original_design")
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
