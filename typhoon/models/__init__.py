"""The model stage: the backbone registry and loading, the MLM head, and the fast dropout kernel. Other
stages take these names from here (``from typhoon.models import load_backbone``): the backbones by short
name and their loading (``backbones``), the adapted backbones' shipped tensors (``adapted``), and the
MLM head that scores selected positions only (``mlm_head``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562):
# importing any module of the stage runs this file first, and adapted (torch-free, the weights' cards) must
# not pay for transformers and torch (seconds), which backbones and mlm_head import.
if TYPE_CHECKING:
    from typhoon.models.adapted import ADAPTED
    from typhoon.models.backbones import (
        BACKBONES,
        Backbone,
        load_backbone,
        minilm_dir,
        seeded,
        weights_digest,
    )
    from typhoon.models.mlm_head import MaskedLM

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
