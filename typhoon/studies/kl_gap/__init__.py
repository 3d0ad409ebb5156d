"""The KL-gap study: why Typhoon's masking is so much closer to uniform than the paper's 7e-4 nats/token. One folder:
its registered design (``design``: the causes, the hypothesis, a state's files), its cells (``cells``: a phase-1
state, which the kl-original study's rows use too), its policy (``policy``), its table (``table``) and its command
(``commands``: ``python -m typhoon kl-gap``). Lazy (PEP 562): the command line reads the design and adds the
command without pandas or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    from typhoon.studies.kl_gap import design
    from typhoon.studies.kl_gap.cells import KL_STATE, run_phase_one, state_is_complete
    from typhoon.studies.kl_gap.commands import STUDY
    from typhoon.studies.kl_gap.design import (
        CAUSES,
        HYPOTHESIS,
        RUN_FILE,
        STATE_FILE,
        Cause,
        cause_named,
        named,
        state_dir,
        state_folder,
    )
    from typhoon.studies.kl_gap.policy import KlGapCauses, cause_config, write_table
    from typhoon.studies.kl_gap.table import kl_gap_conclusion, kl_gap_display, kl_gap_table

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
