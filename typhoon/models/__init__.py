"""The model stage: the backbone registry and loading, the MLM head, and the fast dropout kernel. Other
stages take these names from here (``from typhoon.models import load_backbone``): the backbones by short
name and their loading (``backbones``), the adapted backbones' shipped tensors (``adapted``), and the
MLM head that scores selected positions only (``mlm_head``).
"""

from __future__ import annotations

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and adapted (torch-free, the weights' cards) must not pay for
# transformers and torch (seconds), which backbones and mlm_head import.
_HOMES = {
    **dict.fromkeys(["ADAPTED"], "adapted"),
    **dict.fromkeys(["BACKBONES", "Backbone", "load_backbone", "minilm_dir", "seeded", "weights_digest"], "backbones"),
    **dict.fromkeys(["MaskedLM"], "mlm_head"),
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_face(__name__, _HOMES)
