"""The KL-gap study: why Typhoon's masking is so much closer to uniform than the paper's 7e-4 nats/token. One folder:
its registered design (``design``: the causes, the hypothesis, a state's files), its cells (``cells``: a phase-1
state, which the kl-original study's rows use too), its policy (``policy``), its table (``table``) and its command
(``commands``: ``python -m typhoon kl-gap``). Lazy (PEP 562): the command line reads the design and adds the
command without pandas or torch.
"""

from __future__ import annotations

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["CAUSES", "HYPOTHESIS", "RUN_FILE", "STATE_FILE", "Cause", "cause_named", "named", "state_dir",
                     "state_folder"], "design"),
    **dict.fromkeys(["KL_STATE", "run_phase_one", "state_is_complete"], "cells"),
    **dict.fromkeys(["KlGapCauses", "cause_config", "write_table"], "policy"),
    **dict.fromkeys(["kl_gap_conclusion", "kl_gap_display", "kl_gap_table"], "table"),
    **dict.fromkeys(["STUDY"], "commands"),
}
_NAMESPACES = ("design",)
__all__ = [*_HOMES, *_NAMESPACES]
__getattr__, __dir__ = lazy_face(__name__, _HOMES, _NAMESPACES)
