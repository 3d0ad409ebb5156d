"""Typhoon in your own transformers ``Trainer``: the bundle's masking strategies as data collators, and for
Typhoon the part that learns, with no change to the training loop but the Trainer class (docs/hf_trainer.md)::

    from typhoon.hf import TyphoonTrainer, masking_collator

    collator = masking_collator(tokenizer, "typhoon", mlm_probability=0.15)   # or "random", "whole_word", ...
    trainer = TyphoonTrainer(model=model, args=args, train_dataset=tokenized, data_collator=collator)
    trainer.train()

- :mod:`.collators`: ``masking_collator`` and the collators (``MaskingCollator``: masks as it collates, or
  pads where a Masker draws at the step; ``TyphoonCollator``: pads, its masks drawn at the step);
  ``strategy_names``, the strategies they take.
- :mod:`.masker`: ``Masker``, a step's masks and what its backward teaches, in any loop (the plain-PyTorch way;
  the callback holds one), shared across the ranks of a data-parallel run, saved and checked in checkpoints.
- :mod:`.callback`: ``TyphoonCallback``, the Masker in a ``Trainer``'s events, checkpoints.
- :mod:`.trainer`: ``TyphoonTrainerMixin`` (draws the masks when a step's batches are fetched) and
  ``TyphoonTrainer``.
- :mod:`.words`: special tokens and word ids of token ids, from the fast tokenizer.

Importing the face loads neither transformers' Trainer nor torch; ``typhoon.hf`` changes nothing of
transformers' logging or progress bars. It needs only the core install (``pip install typhoon``: torch,
transformers, accelerate, numpy), not the bundle's extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon import lazy_face

# Each name other stages use, imported from the module of this stage that defines it, and the modules they use
# whole. Never run: lazy_face reads these lines and imports a name from its module on first use (PEP 562).
if TYPE_CHECKING:
    from typhoon.hf.callback import TyphoonCallback
    from typhoon.hf.collators import MaskingCollator, TyphoonCollator, masking_collator, strategy_names
    from typhoon.hf.masker import Masker
    from typhoon.hf.trainer import TyphoonTrainer, TyphoonTrainerMixin
    from typhoon.hf.words import WordIds

__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)
