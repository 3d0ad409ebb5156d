"""The GPU's MLM step, each choice alone on the device: host or device masks, random or Typhoon, eager or compiled.

    python benchmarks/gpu_step_trial.py [--backbone bert-base-shape] [--warmup 10] [--steps 30] [--examples N]
        [--variants random:host,typhoon:host,random:device,typhoon:device,typhoon:device:reduce-overhead]

Three of issue 50's GPU questions, for a GPU machine (``scripts/gpu_check.sh`` step 2c), measured with one variant at
a time on the device, so that no other cell blurs them (the grid's ratios share the device):

- does drawing the masks and keeping Typhoon's state on the device pay (``host`` against ``device``: the run's
  ``RunContext.masks_on_device``, False and True);
- is Typhoon's MLM step within 1.05x random's (``typhoon:device`` against ``random:device``);
- do CUDA graphs or ``torch.compile`` pay (a third field: ``reduce-overhead``, CUDA graphs through
  torch.compile; ``default``; each encoder layer compiled with ``nn.Module.compile``, the embedding left eager
  since the saliency probe hooks it). Keep one only if its ratio is clearly below 1 and its warm-up is repaid
  within a cell (a paper-shapes MRPC cell takes about 230 MLM steps per epoch).

Each variant: the run's own MLM step (:func:`typhoon.training.step.mlm_step`) on the ``paper-shapes`` profile's
settings over the run's own length-grouped MRPC batches (widths vary as in a run: every new width is a new
shape to compile or capture), a fresh model from the same seed, ``--warmup`` steps, then ``--steps`` steps each
timed whole (synchronized). Prints the warm-up seconds, the median and p90 ms per step and the ratio to
``random:device``. On the CPU it runs too (``--device cpu --backbone tiny-random``), to check the trial itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from typhoon.data.batching import length_grouped_batches
from typhoon.masking import SaliencySource, saliency_kind
from typhoon.profiles import resolve
from typhoon.training import run as training_run
from typhoon.training import step as training_step

MODES = ("eager", "default", "reduce-overhead", "max-autotune")


def parse_variant(text: str) -> tuple[str, bool, str]:
    """'typhoon:device:reduce-overhead' -> (strategy, masks on the device?, compile mode)."""
    strategy, masks, mode = (text.split(":") + ["eager"])[:3]
    if masks not in ("host", "device") or mode not in MODES:
        raise ValueError(f"variant {text!r}: write STRATEGY:host|device[:{'|'.join(MODES)}]")
    return strategy, masks == "device", mode


def wait(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def trial(ctx, strategy_name: str, on_device: bool, mode: str, warmup: int, steps: int) -> tuple[float, list[float]]:
    """(warm-up seconds, ms of each timed step) of one variant."""
    config = dataclasses.replace(ctx.config, strategy=strategy_name)
    generator = torch.Generator(ctx.device if on_device else "cpu").manual_seed(config.seed)
    ctx = dataclasses.replace(ctx, config=config, masks_on_device=on_device, mask_generator=generator)
    torch.manual_seed(config.seed)
    mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device)
    if mode != "eager":
        encoder = mlm.encoder
        for layer in encoder.encoder.layer if hasattr(encoder, "encoder") else encoder.transformer.layer:
            layer.compile(mode=None if mode == "default" else mode)
    optimizer = training_step.make_optimizer(mlm, config.mlm_lr, config.weight_decay)
    scheduler = training_step.linear_schedule(optimizer, warmup + steps, config.warmup_ratio)
    strategy = training_run.prepared_strategy(ctx)
    saliency = SaliencySource(saliency_kind(config), None)
    train = ctx.data["train"]
    lengths = [len(x["input_ids"]) for x in train]
    batches = list(length_grouped_batches(lengths, config.batch_size, ctx.rng))
    batches = (batches * (1 + (warmup + steps) // len(batches)))[:warmup + steps]

    def one_step(idx) -> None:
        training_step.mlm_step(ctx, mlm, strategy, optimizer, scheduler, [train[i] for i in idx], saliency)

    wait(ctx.device)
    start = time.perf_counter()
    for idx in batches[:warmup]:
        one_step(idx)
    wait(ctx.device)
    warm_s = time.perf_counter() - start
    per_step = []
    for idx in batches[warmup:]:
        began = time.perf_counter()
        one_step(idx)
        wait(ctx.device)  # each step timed whole (a run does not wait here; the ratios are what count)
        per_step.append((time.perf_counter() - began) * 1e3)
    return warm_s, per_step


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="bert-base-shape")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--variants", default="random:host,typhoon:host,random:device,typhoon:device,"
                                              "typhoon:device:reduce-overhead")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--examples", type=int, help="only the first N MRPC training examples (default: all)")
    args = parser.parse_args(argv)
    try:
        variants = [parse_variant(v) for v in args.variants.split(",")]
    except ValueError as err:
        parser.error(str(err))
    config = resolve("paper-shapes", {"task": "mrpc", "backbone": args.backbone, "strategy": "random", "seed": 0},
                     {"device": args.device, "max_train_examples": args.examples})
    ctx = training_run.set_up(config, progress=False)
    name = torch.cuda.get_device_name(ctx.device) if ctx.device.type == "cuda" else "cpu"
    print(f"{args.backbone}, MRPC, batch {config.batch_size}, on {name} (torch {torch.__version__}); "
          f"{args.warmup} warm-up + {args.steps} timed MLM steps per variant, one variant at a time")
    reference = None
    for strategy, on_device, mode in variants:
        warm_s, per_step = trial(ctx, strategy, on_device, mode, args.warmup, args.steps)
        median = statistics.median(per_step)
        label = f"{strategy}:{'device' if on_device else 'host'}:{mode}"
        if (strategy, on_device, mode) == ("random", True, "eager"):
            reference = median
        ratio = f"{median / reference:.2f}x random:device" if reference else ""
        print(f"{label:>32}: warm-up {warm_s:6.1f} s, median {median:7.2f} ms/step, "
              f"p90 {sorted(per_step)[int(0.9 * len(per_step))]:7.2f} ms  {ratio}", flush=True)


if __name__ == "__main__":
    main()
