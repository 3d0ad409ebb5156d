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

import datasets
import torch
from example_inputs import add_arguments, load_model, load_texts
from transformers import TrainingArguments

from typhoon.hf import TyphoonTrainer, masking_collator


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
    add_arguments(parser, "hf_trainer")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a strategy parameter")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--save-steps", type=int, default=500)
    parser.add_argument("--save-total-limit", type=int, default=2, help="checkpoints kept (the last ones)")
    args = parser.parse_args(argv)

    # a bad strategy or parameter is refused here, before the data is read and before any training
    model, tokenizer = load_model(args.model)
    collator = masking_collator(tokenizer, args.strategy, mlm_probability=args.p, seed=args.seed,
                                **parse_set(args.set))

    texts = datasets.Dataset.from_dict({"text": load_texts(args)})
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
