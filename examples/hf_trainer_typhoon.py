"""Masked-LM training with transformers' Trainer and a masking strategy of the Typhoon bundle (run_mlm.py style).

    python examples/hf_trainer_typhoon.py --model minilm-l6-mlm --task mrpc --strategy typhoon --max-steps 50
    python examples/hf_trainer_typhoon.py --model ./my-checkpoint --train-file corpus.txt --strategy whole_word \\
        --mlm-probability 0.2 --set corruption=mask_only --epochs 3 --output-dir out/
    torchrun --nproc_per_node 2 examples/hf_trainer_typhoon.py --model tiny-random --max-steps 20   # data-parallel
    accelerate launch --multi_gpu --num_processes 2 examples/hf_trainer_typhoon.py --model tiny-random --max-steps 20

``--model``: a folder with a masked-LM checkpoint, a hub id, or one of the bundle's backbones (minilm-l6-mlm,
the embedded one, and tiny-random run offline). ``--train-file``: one text per line; or ``--task``: a GLUE task's
training sentences (mrpc and cola ship with the bundle). ``--strategy`` and its parameters (``--mlm-probability``
or ``--p``, ``--set delta=0.3``, ...) are the bundle's (``python -m typhoon --help`` lists them). Checkpoints go
to ``--output-dir`` (by default outside the repository: ~/.cache/typhoon/hf_trainer, or under
$XDG_CACHE_HOME) every ``--save-steps``, the last ``--save-total-limit`` kept; ``--resume`` goes on from the
last one, masks and Typhoon state included. The Trainer shows its progress bar and logs as usual.

Under torchrun or ``accelerate launch`` every process runs this script: the Trainer trains data-parallel (gloo
on CPUs, NCCL on GPUs) and Typhoon's state is shared by the processes (docs/hf_trainer.md).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import datasets
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer, TrainingArguments

from typhoon.hf import TyphoonTrainer, masking_collator, strategy_names


def load_model(name: str):
    """(model, tokenizer): a bundle backbone by its short name, else any AutoModelForMaskedLM checkpoint."""
    from typhoon.names import BACKBONES

    if name.lower() in BACKBONES:
        from typhoon.models import load_backbone

        backbone = load_backbone(name)
        return backbone.mlm_model(seed=0).model, backbone.tokenizer
    return AutoModelForMaskedLM.from_pretrained(name), AutoTokenizer.from_pretrained(name, use_fast=True)


def load_texts(args) -> datasets.Dataset:
    if args.train_file:
        with open(args.train_file, encoding="utf-8") as fh:
            return datasets.Dataset.from_dict({"text": [line.strip() for line in fh if line.strip()]})
    from typhoon.data import get_task, load_glue

    train = load_glue(args.task)["train"]
    columns = get_task(args.task).normalized_text_columns  # a pair task's two sentences, each a text
    return datasets.Dataset.from_dict({"text": [text for column in columns for text in train[column]]})


def default_output_dir() -> str:
    """~/.cache/typhoon/hf_trainer (or under $XDG_CACHE_HOME): outside the repository, kept between runs
    (``--resume``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(cache) / "typhoon" / "hf_trainer")


def parse_set(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set takes NAME=VALUE, got {pair!r}")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value  # a word, such as calibration=softmax
    return params


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm-l6-mlm")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--train-file")
    source.add_argument("--task", default="mrpc")
    parser.add_argument("--strategy", default="typhoon", help=f"one of {strategy_names()}")
    parser.add_argument("--p", "--mlm-probability", dest="p", type=float, default=0.15,
                        help="the masking budget (transformers calls it mlm_probability)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a strategy parameter")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--max-train-examples", type=int)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default=default_output_dir(), help="default: %(default)s")
    parser.add_argument("--save-steps", type=int, default=500)
    parser.add_argument("--save-total-limit", type=int, default=2, help="checkpoints kept (the last ones)")
    parser.add_argument("--resume", action="store_true", help="go on from the last checkpoint in --output-dir")
    args = parser.parse_args(argv)

    # a bad strategy or parameter is refused here, before the data is read and before any training
    model, tokenizer = load_model(args.model)
    collator = masking_collator(tokenizer, args.strategy, mlm_probability=args.p, seed=args.seed,
                                **parse_set(args.set))

    texts = load_texts(args)
    if args.max_train_examples:
        texts = texts.select(range(min(args.max_train_examples, len(texts))))
    tokenized = texts.map(lambda batch: tokenizer(batch["text"], truncation=True, max_length=args.max_length),
                          batched=True, remove_columns=["text"])

    # several processes on a machine without a GPU: transformers trains them data-parallel only with use_cpu
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    training = TrainingArguments(
        use_cpu=processes > 1 and not torch.cuda.is_available(),
        output_dir=args.output_dir, per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum, learning_rate=args.lr, num_train_epochs=args.epochs,
        max_steps=args.max_steps, bf16=args.bf16, dataloader_num_workers=args.num_workers, seed=args.seed,
        save_steps=args.save_steps, save_total_limit=args.save_total_limit,
        logging_steps=max(1, min(50, args.max_steps if args.max_steps > 0 else 50)))
    trainer = TyphoonTrainer(model=model, args=training, train_dataset=tokenized, data_collator=collator)
    if trainer.is_world_process_zero():
        print(f"checkpoints go to {args.output_dir}", flush=True)
    result = trainer.train(resume_from_checkpoint=True if args.resume else None)
    if not trainer.is_world_process_zero():
        return  # every process holds the same Typhoon state: the first one reports

    print(f"{args.strategy} on {args.model}: {result.global_step} steps, training loss {result.training_loss:.4f}")
    strategy = collator.strategy
    if strategy.needs_saliency:
        diagnostics = strategy.diagnostics()
        print(f"Typhoon: {strategy.steps} updates, {diagnostics['n_seen']} token types seen, KL to uniform "
              f"{diagnostics['kl_to_uniform']:.3g} nats/token, masking probabilities "
              f"{diagnostics['spread_min']:.4f} .. {diagnostics['spread_max']:.4f}")


if __name__ == "__main__":
    main()
