"""The data stage: the GLUE task files and their checksums, tokenizing with word ids, batching, and the
GLUE metrics. Other stages take these names from here (``from typhoon.data import load_glue``): where a
task's files are and reading them (``glue_files``), tokenized examples (``tokenizing``), batches and their
padding (``batching``) and the dev metrics (``metrics``).
"""

from __future__ import annotations

from typhoon import lazy_face

# Each name other stages use, and the module of this stage that defines it. Loaded lazily (PEP 562): importing
# any module of the stage runs this file first, and the batching arithmetic (no dependency; the grid estimate
# and masking use it) must not pay for the metrics (numpy, evaluate) or the GLUE files' readers.
_HOMES = {
    **dict.fromkeys(["PAD_MULTIPLE", "collate", "epoch_batches", "length_grouped_batches", "padded_width",
                     "token_counts"],
                    "batching"),
    **dict.fromkeys(["TaskSpec", "fetch_glue", "get_task", "load_glue", "locate_glue", "require_labelled_splits"],
                    "glue_files"),
    **dict.fromkeys(["tokenize_glue"], "tokenizing"),
    **dict.fromkeys(["glue_metrics", "majority_baseline"], "metrics"),
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_face(__name__, _HOMES)
