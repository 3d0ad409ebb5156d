"""How exact resuming from a checkpoint is, in masks: for each strategy of typhoon.hf in TyphoonTrainer and in a
plain Trainer, beside transformers' own DataCollatorForLanguageModeling (its default global random stream, and
with its ``seed``).

    python benchmarks/bench_resume_masks.py [--steps 8] [--saved-at 4] [--workers 0 2] [--only TEXT]

Each arm trains tiny-random (dropout on, 0.1) on MRPC with the Trainer's own shuffled order, batches of 4, for
``steps`` steps, saving a checkpoint at ``saved-at``; a second run resumes from that checkpoint. A step's masks are
the labels the model trained on (recorded in ``training_step``, wherever the batch was masked). Printed per arm
and data-loader workers: how many of the resumed steps drew the masks of the uninterrupted run (N of N = exact).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import datasets
import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

from typhoon import machine
from typhoon.data import load_glue, tokenize_glue
from typhoon.hf import TyphoonTrainer, masking_collator
from typhoon.models import load_backbone


class Seen:
    """Mixin of a Trainer class: the labels each micro-batch trained on."""

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.seen.append(inputs["labels"].detach().clone())
        return super().training_step(model, inputs, num_items_in_batch)


class SeenTyphoonTrainer(Seen, TyphoonTrainer):
    pass


class SeenTrainer(Seen, Trainer):
    pass


def arms(tokenizer):
    """(name, Trainer class, collator factory) of every arm."""
    out = [(f"TyphoonTrainer, {s}", SeenTyphoonTrainer, lambda s=s: masking_collator(tokenizer, s, seed=5))
           for s in ("random", "whole_word", "span", "typhoon")]
    out += [(f"Trainer, {s} collator", SeenTrainer, lambda s=s: masking_collator(tokenizer, s, seed=5))
            for s in ("random", "whole_word", "span")]
    out += [("Trainer, DataCollatorForLanguageModeling", SeenTrainer,
             lambda: DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)),
            ("Trainer, DataCollatorForLanguageModeling(seed=5)", SeenTrainer,
             lambda: DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=5))]
    return out


def masks(cls, collator, backbone, train, out: Path, steps: int, saved_at: int, workers: int, resume: bool):
    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=4, max_steps=steps,
                             save_strategy="steps", save_steps=saved_at, dataloader_num_workers=workers, seed=11,
                             use_cpu=True, report_to=[], logging_strategy="no", disable_tqdm=True)
    trainer = cls(model=backbone.mlm_model(seed=0).model, args=args, train_dataset=train, data_collator=collator)
    trainer.seen = []
    trainer.train(resume_from_checkpoint=str(out / f"checkpoint-{saved_at}") if resume else None)
    return trainer.seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--saved-at", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--only", default="", help="only the arms whose name holds this text (default: every arm)")
    args = parser.parse_args()
    chosen = [arm for arm in arms(None) if args.only in arm[0]]
    if not chosen:
        parser.error(f"--only {args.only!r} names no arm; the arms: {', '.join(arm[0] for arm in arms(None))}")
    backbone = load_backbone("tiny-random")
    raw = load_glue("mrpc")
    n = 4 * args.steps * 3 // 4  # fewer examples than steps x batch: the resumed steps cross an epoch's end
    split = tokenize_glue(raw.__class__({"train": raw["train"].select(range(n))}), backbone.tokenizer, "mrpc",
                          max_length=128)["train"]
    train = datasets.Dataset.from_dict({"input_ids": split["input_ids"], "token_type_ids": split["token_type_ids"]})
    print(machine.machine_line(machine.machine()))
    print(f"tiny-random, dropout 0.1, MRPC ({n} pairs, shuffled), batches of 4; {args.steps} steps, resumed from the "
          f"checkpoint at step {args.saved_at}: resumed steps whose masks equal the uninterrupted run's")
    print(f"{'arm':<52} " + " ".join(f"{f'workers={w}':>10}" for w in args.workers))
    for name, cls, make in (arm for arm in arms(backbone.tokenizer) if args.only in arm[0]):
        counts = []
        for workers in args.workers:
            with tempfile.TemporaryDirectory() as out:
                whole = masks(cls, make(), backbone, train, Path(out), args.steps, args.saved_at, workers, False)
                resumed = masks(cls, make(), backbone, train, Path(out), args.steps, args.saved_at, workers, True)
            tail = whole[args.saved_at:]
            same = sum(bool(a.shape == b.shape and torch.equal(a, b)) for a, b in zip(tail, resumed, strict=True))
            counts.append(f"{same} of {len(tail)}")
        print(f"{name:<52} " + " ".join(f"{c:>10}" for c in counts), flush=True)


if __name__ == "__main__":
    main()
