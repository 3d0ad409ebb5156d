"""The one change a ``Trainer`` needs for Typhoon: its masks drawn when a step's batches are fetched.

A ``Trainer`` collates ahead of the step (accelerate's data loader looks one batch ahead, and gradient
accumulation fetches all micro-batches of an optimizer step before the first forward), so a collator cannot
draw step t + 1's masks after step t has learnt. ``Trainer.get_batch_samples`` is the point where a step's
micro-batches are fetched, after the previous optimizer step and before any forward, in the main process:
:class:`TyphoonTrainerMixin` masks them there (:meth:`typhoon.hf.callback.TyphoonCallback.draw`), and the
Trainer then counts the masked tokens of the step for its loss (``num_items_in_batch``) as it always does.

Because the masks are drawn in the main process, ``dataloader_num_workers`` > 0 works: the workers only pad
(and derive word ids), and the state they would not see stays in the main process.

The mixin also checks the model (a masked-LM head), adds the :class:`~typhoon.hf.callback.TyphoonCallback` of
the collator, and passes it the checkpoint a ``train(resume_from_checkpoint=...)`` resumes from.
"""

from __future__ import annotations

from transformers import Trainer
from transformers.trainer_utils import get_last_checkpoint

from .callback import TyphoonCallback, require_mlm_head
from .collators import MaskingCollator, TyphoonCollator


class TyphoonTrainerMixin:
    """Put first among a Trainer class's bases: ``class MyTrainer(TyphoonTrainerMixin, Trainer)``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        require_mlm_head(self.model)
        self.typhoon_callback = None
        collator = self.data_collator
        if not isinstance(collator, MaskingCollator):
            return  # any other collator: a plain Trainer
        found = [c for c in self.callback_handler.callbacks if isinstance(c, TyphoonCallback)]
        if any(c.collator is not collator for c in found):
            raise ValueError("a TyphoonCallback of another collator was given: pass none (the Trainer adds the "
                             "collator's own) or TyphoonCallback(data_collator)")
        if not found:
            found = [TyphoonCallback(collator)]
            self.add_callback(found[0])
        self.typhoon_callback = found[0]
        self.typhoon_callback.scaler = getattr(self.accelerator, "scaler", None)  # fp16 only
        if isinstance(collator, TyphoonCollator):
            collator.attached = True

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The step's micro-batches, masked now from the current state (Typhoon), then counted by the Trainer."""
        if self.typhoon_callback is None or not self.typhoon_callback.learns:
            return super().get_batch_samples(epoch_iterator, num_batches, device)
        masked = (self.typhoon_callback.draw(batch) for batch in epoch_iterator)
        return super().get_batch_samples(masked, num_batches, device)

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if self.typhoon_callback is not None:
            path = resume_from_checkpoint
            if path is True:
                path = get_last_checkpoint(self.args.output_dir)  # None: the Trainer says there is none
            self.typhoon_callback.resume_from = path or None
        return super().train(resume_from_checkpoint, *args, **kwargs)


class TyphoonTrainer(TyphoonTrainerMixin, Trainer):
    """transformers' ``Trainer`` with Typhoon's masks drawn at each step (:class:`TyphoonTrainerMixin`)."""
