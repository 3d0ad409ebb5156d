"""The data stage: the GLUE task files and their checksums, tokenizing with word ids, batching, and the
GLUE metrics. Other stages take these names from here (``from typhoon.data import load_glue``): where a
task's files are and reading them (``glue_files``), tokenized examples (``tokenizing``), batches and their
padding (``batching``) and the dev metrics (``metrics``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562):
# importing any module of the stage runs this file first, and the batching arithmetic (no dependency; the grid
# estimate and masking use it) must not pay for the metrics (numpy, evaluate) or the GLUE files' readers.
if TYPE_CHECKING:
    from typhoon.data.batching import (
        PAD_MULTIPLE,
        collate,
        epoch_batches,
        length_grouped_batches,
        padded_width,
        token_counts,
    )
    from typhoon.data.glue_files import (
        TaskSpec,
        fetch_glue,
        get_task,
        load_glue,
        locate_glue,
        require_labelled_splits,
    )
    from typhoon.data.metrics import glue_metrics, majority_baseline
    from typhoon.data.tokenizing import tokenize_glue

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
