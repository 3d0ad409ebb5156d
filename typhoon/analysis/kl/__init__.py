"""The KL of Typhoon's masking from uniform masking, the measures every study shares. One package, one face (other
stages import from ``typhoon.analysis.kl``):

- ``units``: every definition of "KL from uniform masking" (per token, per masked token, per sequence; nats,
  bits) and the band's ceiling;
- ``budget_spread``: the budget-spread bottleneck, from a profile's saved masking states (notebook 30).

The studies of the gap to the paper's 7e-4 nats/token are studies of their own (:mod:`typhoon.studies.kl_gap`,
:mod:`typhoon.studies.kl_original`). Lazy (PEP 562, ``lazy_face``): importing the face costs no pandas or scipy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    # Modules used whole: notebook 30 reads the budget-spread analysis step by step (``budget_spread.calibration_sweep``).
    from typhoon.analysis.kl import budget_spread, units
    from typhoon.analysis.kl.budget_spread import PAPER_KL_NATS_PER_TOKEN, load_masking_state, state_metrics
    from typhoon.analysis.kl.units import KL_DEFINITIONS, kl_definitions, max_band_kl, rate_spread

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
