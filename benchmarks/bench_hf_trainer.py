"""A transformers Trainer MLM step with typhoon.hf's Typhoon collator and callback against the same step with
DataCollatorForLanguageModeling, on the same batches.

    python benchmarks/bench_hf_trainer.py [--backbone minilm-l6-mlm] [--steps 8] [--repeats 5] [--batch-size 32]

Both arms train the same model from the same weights on the same MRPC batches (a sequential sampler over the
same examples, B=32), fp32, dropout as the checkpoint has it, the Trainer's default optimizer. A step's time is
the wall time between two consecutive ``on_step_end`` events: it includes fetching and collating the batch,
Typhoon's mask draw (at the step's start), its saliency read and update, the forward, backward and optimizer
step. Each repeat trains ``steps`` + 1 steps of each arm, A then B, alternating which arm goes first, and drops
the first step of each (warm-up); the ratio is the median Typhoon step over the median baseline step.
Prints the CPU, the thread count and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import datasets
import torch
from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

from typhoon import machine
from typhoon.data import load_glue, tokenize_glue
from typhoon.hf import TyphoonTrainer, masking_collator
from typhoon.models import load_backbone


class StepClock(TrainerCallback):
    def __init__(self):
        self.ends = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())


def step_times(arm: str, backbone, start: dict, dataset, batch_size: int, steps: int) -> list[float]:
    model = backbone.mlm_model(seed=0).model
    model.load_state_dict(start)
    tokenizer = backbone.tokenizer
    clock = StepClock()
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=batch_size, max_steps=steps + 1,
                                 report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                 use_cpu=True, train_sampling_strategy="sequential", seed=0)
        if arm == "typhoon":
            collator = masking_collator(tokenizer, "typhoon", p=0.15, seed=0)
            trainer = TyphoonTrainer(model=model, args=args, train_dataset=dataset, data_collator=collator,
                                     callbacks=[clock])
        else:
            collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, pad_to_multiple_of=8, seed=0)
            trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator, callbacks=[clock])
        trainer.train()
    ends = clock.ends
    return [b - a for a, b in zip(ends[:-1], ends[1:], strict=True)]  # steps 2 .. steps + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="minilm-l6-mlm")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    backbone = load_backbone(args.backbone)
    start = {k: v.clone() for k, v in backbone.mlm_model(seed=0).model.state_dict().items()}
    raw = load_glue("mrpc")
    n = args.batch_size * (args.steps + 1)
    split = tokenize_glue(raw.__class__({"train": raw["train"].select(range(n))}), backbone.tokenizer, "mrpc")["train"]
    dataset = datasets.Dataset.from_dict({k: split[k] for k in ("input_ids", "token_type_ids")})
    times = {"typhoon": [], "baseline": []}
    for repeat in range(args.repeats):
        order = ("typhoon", "baseline") if repeat % 2 == 0 else ("baseline", "typhoon")
        for arm in order:
            times[arm] += step_times(arm, backbone, start, dataset, args.batch_size, args.steps)
        print(f"repeat {repeat + 1}: " + ", ".join(f"{arm} {statistics.median(t) * 1000:.0f} ms"
                                                  for arm, t in times.items()), flush=True)
    typhoon, baseline = (statistics.median(times[arm]) for arm in ("typhoon", "baseline"))
    print(f"{machine.cpu_features().model}, {torch.get_num_threads()} threads, {args.backbone}, "
          f"B={args.batch_size}, {args.repeats} x {args.steps} steps per arm")
    print(f"median step: Typhoon collator + callback {typhoon * 1000:.1f} ms, DataCollatorForLanguageModeling "
          f"{baseline * 1000:.1f} ms, ratio {typhoon / baseline:.3f}")


if __name__ == "__main__":
    main()
