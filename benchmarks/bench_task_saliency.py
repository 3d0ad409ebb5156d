"""What task-loss saliency (``typhoon_task``) costs per phase-1 step next to the paper's MLM saliency.

The same masked MRPC batches (minilm-l6, the ``cpu`` profile's settings, batch 32) go through one phase-1
training step of each kind, interleaved so that both see the same machine load: ``mlm`` = forward, one
backward, the probe's saliency; ``task`` = the frozen task model's forward and input-only backward
(:func:`typhoon.masking.task_saliency.task_saliency`), then the MLM forward and backward without the probe.
Optimizer steps are left out (the same for both), and so is the task model's warm-up (``task_head_warmup``
fine-tuning steps, once per run). Reports the median seconds per step of each and their ratio.

    PYTHONPATH=$PWD python benchmarks/bench_task_saliency.py --steps 12 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from typhoon.data.batching import PAD_MULTIPLE, collate, length_grouped_batches
from typhoon.masking import SaliencyProbe, get_strategy
from typhoon.masking.task_saliency import task_saliency
from typhoon.profiles import resolve
from typhoon.training import run as training_run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="timed steps of each kind (after 2 warm-up steps)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    args = parser.parse_args(argv)
    config = resolve("cpu", dict(task="mrpc", backbone=args.backbone, strategy="typhoon", seed=0),
                     {"max_train_examples": 32 * (args.steps + 2), "max_eval_examples": 32,
                      "num_threads": args.threads})
    ctx = training_run.set_up(config, progress=False)
    tokenizer, train = ctx.backbone.tokenizer, ctx.data["train"]
    mlm = ctx.backbone.mlm_model(seed=0, **ctx.kernels).train()
    task_model = ctx.backbone.classifier(ctx.task.num_labels, seed=0, **ctx.kernels).eval()  # untrained: same cost
    masker = get_strategy("random", p=config.p)
    generator = torch.Generator().manual_seed(0)
    lengths = [len(x["input_ids"]) for x in train]
    times = {"mlm": [], "task": []}
    for i, idx in enumerate(length_grouped_batches(lengths, config.batch_size, ctx.rng)):
        batch = collate([train[j] for j in idx], tokenizer.pad_token_id, PAD_MULTIPLE)
        masked, labels = masker(batch, generator, mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
        inputs = ctx.backbone.model_inputs({**batch, "input_ids": masked})
        for kind in ("mlm", "task") if i % 2 == 0 else ("task", "mlm"):
            started = time.perf_counter()
            if kind == "mlm":
                with SaliencyProbe(mlm.input_embeddings()) as probe:
                    with ctx.autocast():
                        loss = mlm(labels=labels, **inputs)
                    loss.backward()
                probe.saliency(batch["input_ids"])
            else:
                task_saliency(task_model, inputs, batch["labels"], batch["input_ids"], ctx.autocast)
                with ctx.autocast():
                    loss = mlm(labels=labels, **inputs)
                loss.backward()
            mlm.zero_grad(set_to_none=True)
            if i >= 2:  # warm-up: kernels for new shapes
                times[kind].append(time.perf_counter() - started)
    mlm_s, task_s = statistics.median(times["mlm"]), statistics.median(times["task"])
    print(f"{args.backbone}, MRPC, batch {config.batch_size}, {ctx.precision.name}, {args.threads} thread(s), "
          f"{len(times['mlm'])} steps each: MLM saliency {mlm_s:.3f} s/step, task saliency {task_s:.3f} s/step, "
          f"ratio {task_s / mlm_s:.2f}")


if __name__ == "__main__":
    main()
