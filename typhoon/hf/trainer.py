"""The one change a ``Trainer`` needs for Typhoon: its masks drawn when a step's batches are fetched.

A ``Trainer`` collates ahead of the step (accelerate's data loader looks one batch ahead, and gradient
accumulation fetches all micro-batches of an optimizer step before the first forward), so a collator cannot
draw step t + 1's masks after step t has learnt. ``Trainer.get_batch_samples`` is the point where a step's
micro-batches are fetched, after the previous optimizer step and before any forward, in the main process:
:class:`TyphoonTrainerMixin` masks them there (:meth:`typhoon.hf.masker.Masker.draw`), and the Trainer then
counts the masked tokens of the step for its loss (``num_items_in_batch``) as it always does.

Every strategy's masks are drawn there, from one stream saved with each checkpoint: the generator's state at a
checkpoint is that after the last step's masks, whatever the data loader fetched ahead, so a resumed run draws
the masks of an uninterrupted one (random, whole-word and span as much as Typhoon). For the same reason
``dataloader_num_workers`` > 0 changes no mask: the workers only pad (and derive word ids), and the state they
would not see stays in the main process.

The mixin also checks the model (a masked-LM head) and the arguments (fp16 needs a GPU; pinned memory only
warns on a CPU), adds the :class:`~typhoon.hf.callback.TyphoonCallback` of the collator, and passes it the
checkpoint a ``train(resume_from_checkpoint=...)`` resumes from.
"""

from __future__ import annotations

from transformers import Trainer
from transformers.trainer_utils import get_last_checkpoint

from typhoon.masking import rank_and_size

from .callback import TyphoonCallback, require_mlm_head
from .collators import MaskingCollator


class TyphoonTrainerMixin:
    """Put first among a Trainer class's bases: ``class MyTrainer(TyphoonTrainerMixin, Trainer)``."""

    def __init__(self, *args, **kwargs):
        training_args = kwargs.get("args", args[1] if len(args) > 1 else None)
        collator = kwargs.get("data_collator", args[2] if len(args) > 2 else None)
        if isinstance(collator, MaskingCollator) and training_args is not None:
            check_arguments(training_args)  # before the Trainer sets up its accelerator from them
        super().__init__(*args, **kwargs)
        require_mlm_head(self.model)
        self.typhoon_callback = None
        collator = self.data_collator
        if not isinstance(collator, MaskingCollator):
            return  # any other collator: a plain Trainer
        check_arguments(self.args)
        found = [c for c in self.callback_handler.callbacks if isinstance(c, TyphoonCallback)]
        if any(c.collator is not collator for c in found):
            raise ValueError("a TyphoonCallback of another collator was given: pass none (the Trainer adds the "
                             "collator's own) or TyphoonCallback(data_collator)")
        if not found:
            found = [TyphoonCallback(collator)]
            self.add_callback(found[0])
        self.typhoon_callback = found[0]
        masker = self.typhoon_callback.attach()
        masker.scaler = getattr(self.accelerator, "scaler", None)  # fp16 only

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        """The step's micro-batches, masked now (from the current state: Typhoon), then counted by the Trainer."""
        if self.typhoon_callback is None:
            return super().get_batch_samples(epoch_iterator, num_batches, device)
        masked = (self.typhoon_callback.masker.draw(batch) for batch in epoch_iterator)
        return super().get_batch_samples(masked, num_batches, device)

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        if self.typhoon_callback is not None:
            path = resume_from_checkpoint
            if path is True:
                path = get_last_checkpoint(self.args.output_dir)  # None: the Trainer says there is none
            self.typhoon_callback.resume_from = path or None
        return super().train(resume_from_checkpoint, *args, **kwargs)


def check_arguments(args) -> None:
    """Refuse fp16 on a CPU, and processes that would each train alone, saying why; leave pinned memory off on
    a CPU (it only warns: nothing to pin for)."""
    from transformers.training_args import ParallelMode

    mode = args.parallel_mode  # sets up the processes first (torch.distributed under torchrun)
    _, processes = rank_and_size()
    if processes > 1 and mode != ParallelMode.DISTRIBUTED:
        raise ValueError(f"{processes} processes were started (torchrun, accelerate launch), but the Trainer would "
                         f"train each alone ({mode}): their models would drift apart under one shared "
                         "Typhoon state. On a machine without a GPU, transformers trains data-parallel only with "
                         "TrainingArguments(use_cpu=True)")
    if args.device.type == "cpu":
        if args.fp16:
            raise ValueError("fp16=True on a CPU: the Trainer's fp16 mixed precision (autocast with a gradient "
                             "scaler) runs on a GPU; on this CPU the step would run in float32 while saying fp16. "
                             "Use bf16=True (bfloat16 autocast, which the CPU runs) or leave fp16 off")
        args.dataloader_pin_memory = False


class TyphoonTrainer(TyphoonTrainerMixin, Trainer):
    """transformers' ``Trainer`` with Typhoon's masks drawn at each step (:class:`TyphoonTrainerMixin`)."""
