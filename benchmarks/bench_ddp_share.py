"""The all-reduce that shares Typhoon's state across the ranks of a data-parallel run: its share of a training step.

    python benchmarks/bench_ddp_share.py [--backbone minilm-l6-mlm] [--processes 2] [--batch-size 16] [--steps 8]

Starts ``torchrun --nproc_per_node PROCESSES`` (gloo on a CPU, one thread per process) on this script; each rank
trains TyphoonTrainer on MRPC (dropout as the checkpoint has it, the Trainer's default optimizer) for one warm-up
step and ``steps`` timed ones. A step's time is the wall time between two consecutive ``on_step_end`` events
(fetching, masking, forward, backward with DDP's gradient all-reduce, Typhoon's update, optimizer step). Timed
inside each step: the all-reduce of the Typhoon sums (typhoon.masking.across_ranks.all_reduce_sum, a (4, V)
float64 tensor) and the whole shared update (the sums, the all-reduce, the EMA and the recalibration). Rank 0
prints the CPU, the medians and the shares.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def worker(args) -> None:
    import datasets
    import torch
    from transformers import TrainerCallback, TrainingArguments

    from typhoon import machine
    from typhoon.data import load_glue, tokenize_glue
    from typhoon.hf import TyphoonTrainer, masking_collator
    from typhoon.masking import across_ranks
    from typhoon.models import load_backbone

    torch.set_num_threads(1)
    timed = {"reduce": [], "update": []}

    def clocked(function, key):
        def run(*a, **k):
            started = time.perf_counter()
            out = function(*a, **k)
            timed[key].append(time.perf_counter() - started)
            return out
        return run

    across_ranks.all_reduce_sum = clocked(across_ranks.all_reduce_sum, "reduce")
    across_ranks.shared_update = clocked(across_ranks.shared_update, "update")
    from typhoon.hf import masker as masker_module
    masker_module.shared_update = across_ranks.shared_update  # the name the Masker calls

    backbone = load_backbone(args.backbone)
    raw = load_glue("mrpc")
    n = args.batch_size * args.processes * (args.steps + 1)
    split = tokenize_glue(raw.__class__({"train": raw["train"].select(range(n))}), backbone.tokenizer, "mrpc",
                          max_length=128)["train"]
    train = datasets.Dataset.from_dict({"input_ids": split["input_ids"]})

    class StepClock(TrainerCallback):
        ends: list[float] = []

        def on_step_end(self, *a, **k):
            self.ends.append(time.perf_counter())

    clock = StepClock()
    training = TrainingArguments(output_dir=args.out, per_device_train_batch_size=args.batch_size,
                                 max_steps=args.steps + 1, use_cpu=True, save_strategy="no", logging_strategy="no",
                                 report_to=[], disable_tqdm=True, seed=0, train_sampling_strategy="sequential")
    collator = masking_collator(backbone.tokenizer, "typhoon", seed=0)
    TyphoonTrainer(model=backbone.mlm_model(seed=0).model, args=training, train_dataset=train,
                   data_collator=collator, callbacks=[clock]).train()
    if training.process_index != 0:
        return
    steps = [b - a for a, b in zip(clock.ends[:-1], clock.ends[1:], strict=True)]  # the warm-up step: no start
    step = statistics.median(steps)
    reduce, update = statistics.median(timed["reduce"][1:]), statistics.median(timed["update"][1:])
    vocab = len(collator.strategy.counts)
    print(machine.machine_line(machine.machine()))
    print(f"{args.backbone}, {training.world_size} processes (gloo, 1 thread each), B={args.batch_size} per process, "
          f"{len(steps)} timed steps")
    print(f"step: median {step:.3f} s")
    print(f"all-reduce of the Typhoon sums (4 x {vocab} float64, {4 * vocab * 8 / 1e6:.2f} MB): median "
          f"{reduce * 1e3:.2f} ms = {100 * reduce / step:.2f} % of a step")
    print(f"the whole shared update (sums, all-reduce, EMA, recalibration): median {update * 1e3:.1f} ms = "
          f"{100 * update / step:.2f} % of a step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="minilm-l6-mlm")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                        str(args.processes), __file__, "--worker", "--out", out, "--backbone", args.backbone,
                        "--processes", str(args.processes), "--batch-size", str(args.batch_size), "--steps",
                        str(args.steps)], env=env, check=True)


if __name__ == "__main__":
    main()
