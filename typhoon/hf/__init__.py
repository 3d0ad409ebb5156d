"""Typhoon in your own transformers ``Trainer``: the bundle's masking strategies as data collators, and for
Typhoon the part that learns, with no change to the training loop but the Trainer class (docs/hf_trainer.md)::

    from typhoon.hf import TyphoonTrainer, masking_collator

    collator = masking_collator(tokenizer, "typhoon", p=0.15)   # or "random", "whole_word", "span", ...
    trainer = TyphoonTrainer(model=model, args=args, train_dataset=tokenized, data_collator=collator)
    trainer.train()

- :mod:`.collators`: ``masking_collator`` and the collators (``MaskingCollator``: masks as it collates;
  ``TyphoonCollator``: pads, its masks drawn at the step); ``strategy_names``, the strategies they take.
- :mod:`.callback`: ``TyphoonCallback``, the step's saliency from its own backward, the update, checkpoints.
- :mod:`.trainer`: ``TyphoonTrainerMixin`` (draws the masks when a step's batches are fetched) and
  ``TyphoonTrainer``.
- :mod:`.words`: special tokens and word ids of token ids, from the fast tokenizer.

The face is lazy: importing it loads neither transformers' Trainer nor torch.
"""

from __future__ import annotations

from typhoon import lazy_face

_HOMES = {
    **dict.fromkeys(["MaskingCollator", "TyphoonCollator", "masking_collator", "strategy_names"], "collators"),
    **dict.fromkeys(["TyphoonCallback"], "callback"),
    **dict.fromkeys(["TyphoonTrainer", "TyphoonTrainerMixin"], "trainer"),
    **dict.fromkeys(["WordIds"], "words"),
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_face(__name__, _HOMES)
