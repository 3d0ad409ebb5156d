"""Cost of Typhoon's saliency: the embedding-output hook versus explicit one-hot autograd, and a full
MLM training step with Typhoon versus random masking.

MiniLM-L6 (``BertForMaskedLM`` from the packaged checkpoint; the MLM head is random-init, which
does not change the cost), real MRPC train pairs, B=32, L=64 (padded; ``--batch-size``, ``--length``).

1. saliency: forward + backward + saliency, median time, and the peak-memory increase of one such
   step measured in a fresh subprocess per method (``ru_maxrss`` minus the resident size before it).
   ``plain`` is forward + backward with no saliency at all, the floor.
2. training step: masking + forward + backward + AdamW step; Typhoon adds the probe, the saliency,
   the EMA update and the recalibration. Steps alternate between the two so drift hits both.

    .venv/bin/python benchmarks/bench_saliency.py [--threads 2] [--repeats 5] [--steps 6] [--device cpu]
        [--batch-size 32] [--length 64] [--no-memory]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_masking import BATCH_SIZE, mrpc_features, tensorize  # noqa: E402

from typhoon.masking import SaliencyProbe, get_strategy, maskable_positions  # noqa: E402
from typhoon.models.backbones import load_tokenizer, minilm_dir

SEQ_LEN = 64
MODES = ("plain", "hook", "onehot")


def load_model(device: str):
    from transformers import BertForMaskedLM
    from transformers.utils import logging

    logging.set_verbosity_error()  # the MLM head is missing from the checkpoint: expected
    torch.manual_seed(0)
    return BertForMaskedLM.from_pretrained(minilm_dir()).to(device)


def make_batches(tokenizer, n_batches: int, device: str, size: int = BATCH_SIZE,
                 length: int = SEQ_LEN) -> list[dict[str, torch.Tensor]]:
    features = mrpc_features(tokenizer, n_batches * size, max_length=length)
    batches = [tensorize(features[i:i + size]) for i in range(0, len(features), size)]
    return [{k: v.to(device) for k, v in b.items()} for b in batches]


def model_inputs(batch, input_ids):
    return {"input_ids": input_ids, "attention_mask": batch["attention_mask"],
            "token_type_ids": batch["token_type_ids"]}


def saliency_step(mode: str, model, batch, masked_ids, labels) -> torch.Tensor | None:
    """One forward + backward (+ saliency) in the given mode; returns the saliency (or None)."""
    model.zero_grad(set_to_none=True)
    true_ids = batch["input_ids"]
    if mode == "plain":
        model(**model_inputs(batch, masked_ids), labels=labels).loss.backward()
        return None
    if mode == "hook":
        with SaliencyProbe(model.get_input_embeddings()) as probe:
            model(**model_inputs(batch, masked_ids), labels=labels).loss.backward()
        return probe.saliency(true_ids)
    weight = model.get_input_embeddings().weight
    one_hot = torch.nn.functional.one_hot(masked_ids, weight.shape[0]).to(weight.dtype).requires_grad_(True)
    inputs = model_inputs(batch, None)
    del inputs["input_ids"]
    model(inputs_embeds=one_hot @ weight, **inputs, labels=labels).loss.backward()
    return one_hot.grad.gather(-1, true_ids[..., None]).squeeze(-1)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child_memory(mode: str, threads: int, size: int = BATCH_SIZE, length: int = SEQ_LEN) -> None:
    """Subprocess: peak RSS increase (MiB) of one saliency step, printed as JSON.

    Loading the model peaks higher than its steady state, so the kernel's peak-RSS mark (VmHWM) is
    reset just before the step (``/proc/self/clear_refs`` = 5); the step's peak is then VmHWM.
    Where that reset is not available, fall back to ``ru_maxrss`` and flag a censored value.
    """
    torch.set_num_threads(threads)
    tokenizer = load_tokenizer(minilm_dir())
    model = load_model("cpu")
    batch = make_batches(tokenizer, 1, "cpu", size, length)[0]
    masked_ids, labels = get_strategy("random")(batch, torch.Generator().manual_seed(0),
                                                mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    before = _status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        reset = True
    except OSError:
        reset = False
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    saliency_step(mode, model, batch, masked_ids, labels)
    peak = _status_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"mode": mode, "peak_increase_mib": (peak - before) / 1024,
                      "censored": not reset and peak <= peak_before}))


def bench_saliency(args, tokenizer, model, batches) -> None:
    device = args.device
    model.eval()  # no dropout, so the two saliencies can be compared exactly
    g = torch.Generator(device=device).manual_seed(0)
    batch = batches[0]
    masked_ids, labels = get_strategy("random")(batch, g, mask_token_id=tokenizer.mask_token_id,
                                                vocab_size=len(tokenizer))
    hooked = saliency_step("hook", model, batch, masked_ids, labels)
    explicit = saliency_step("onehot", model, batch, masked_ids, labels)
    scale = explicit.abs().max().item()
    max_err = (hooked - explicit).abs().max().item()

    times = {mode: [] for mode in MODES}
    for mode in MODES:  # warm-up
        saliency_step(mode, model, batch, masked_ids, labels)
    for _ in range(args.repeats):
        for mode in MODES:
            times[mode].append(timed(lambda m=mode: saliency_step(m, model, batch, masked_ids, labels), device))
    median = {mode: statistics.median(t) for mode, t in times.items()}

    memory = {}
    if device == "cpu" and args.memory:
        for mode in MODES:
            out = subprocess.run([sys.executable, __file__, "--child", mode, "--threads", str(args.threads),
                                  "--batch-size", str(args.batch_size), "--length", str(args.length)],
                                 capture_output=True, text=True, check=True)
            memory[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    elif device.startswith("cuda"):
        for mode in MODES:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            saliency_step(mode, model, batch, masked_ids, labels)
            memory[mode] = {"peak_increase_mib": (torch.cuda.max_memory_allocated() - before) / 2**20,
                            "censored": False}

    print(f"\n1. Saliency, MiniLM-L6 BertForMaskedLM, B={args.batch_size}, L={args.length}, V={len(tokenizer)}, "
          f"device={device}, threads={torch.get_num_threads()}, median of {args.repeats}")
    print(f"   hook vs one-hot: max |diff| = {max_err:.2e} (max |saliency| = {scale:.2e})")
    print(f"   {'method':34s}{'time (ms)':>12s}{'vs hook':>10s}{'peak +MiB':>12s}")
    labels_ = {"plain": "forward+backward, no saliency", "hook": "hook saliency (ours)",
               "onehot": "explicit one-hot autograd"}
    for mode in MODES:
        mem = memory.get(mode, {})
        mem_txt = f"{mem['peak_increase_mib']:12.0f}" if mem else f"{'n/a':>12s}"
        if mem.get("censored"):
            mem_txt += " (censored)"
        print(f"   {labels_[mode]:34s}{median[mode] * 1e3:12.1f}{median[mode] / median['hook']:10.2f}{mem_txt}")


def bench_training_step(args, tokenizer, model, batches, counts) -> None:
    device = args.device
    model.train()
    mask_id, vocab = tokenizer.mask_token_id, len(tokenizer)
    strategies = {"random": get_strategy("random"), "typhoon": get_strategy("typhoon")}
    strategies["typhoon"].prepare(counts)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    generator = torch.Generator(device=device).manual_seed(0)
    overhead = {"update+recalibrate": [], "saliency": []}

    def step(name: str, batch) -> None:
        strategy = strategies[name]
        masked_ids, labels = strategy(batch, generator, mask_token_id=mask_id, vocab_size=vocab)
        if strategy.needs_saliency:
            with SaliencyProbe(model.get_input_embeddings()) as probe:
                model(**model_inputs(batch, masked_ids), labels=labels).loss.backward()
            start = time.perf_counter()
            saliency = probe.saliency(batch["input_ids"])
            sync(device)
            middle = time.perf_counter()
            strategy.update(batch, labels != -100, saliency)
            overhead["saliency"].append(middle - start)
            overhead["update+recalibrate"].append(time.perf_counter() - middle)
        else:
            model(**model_inputs(batch, masked_ids), labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for name in strategies:  # warm-up (allocates AdamW state)
        step(name, batches[0])
    times = {name: [] for name in strategies}
    for i in range(args.steps):
        batch = batches[i % len(batches)]
        order = list(strategies) if i % 2 == 0 else list(strategies)[::-1]
        for name in order:
            times[name].append(timed(lambda n=name, b=batch: step(n, b), device))
    median = {name: statistics.median(t) for name, t in times.items()}
    ratio = median["typhoon"] / median["random"]
    print(f"\n2. Training step (masking + forward + backward + AdamW), B={args.batch_size}, L={args.length}, "
          f"device={device}, threads={torch.get_num_threads()}, median of {args.steps} (alternating)")
    print(f"   random  {median['random'] * 1e3:9.1f} ms/step")
    print(f"   typhoon {median['typhoon'] * 1e3:9.1f} ms/step   ratio typhoon/random = {ratio:.3f} (target <= 1.05)")
    extras = sum(statistics.median(v) for v in overhead.values())
    print("   typhoon extras (median): " + ", ".join(
        f"{k} {statistics.median(v) * 1e3:.2f} ms" for k, v in overhead.items()))
    print(f"   ratio from the measured extras alone: (random + extras) / random = "
          f"{(median['random'] + extras) / median['random']:.4f} (robust to machine noise)")
    diag = strategies["typhoon"].diagnostics()
    print(f"   after {strategies['typhoon'].steps} updates: kl_to_uniform = {diag['kl_to_uniform']:.2e} nats/token, "
          f"{diag['n_seen']} types seen")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip", choices=["saliency", "step"], default=None)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help=f"pairs per batch (default {BATCH_SIZE})")
    parser.add_argument("--length", type=int, default=SEQ_LEN, help=f"tokens per pair, padded (default {SEQ_LEN})")
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True,
                        help="on a CPU, each method's peak memory, in a fresh process each (default: yes)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.child:
        child_memory(args.child, args.threads, args.batch_size, args.length)
        return
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(minilm_dir())
    model = load_model(args.device)
    batches = make_batches(tokenizer, max(args.steps, 1), args.device, args.batch_size, args.length)
    if args.skip != "saliency":
        bench_saliency(args, tokenizer, model, batches)
    if args.skip != "step":
        train = mrpc_features(tokenizer, 3668, max_length=args.length)  # all MRPC train pairs
        counts = np.zeros(len(tokenizer), dtype=np.int64)
        for i in range(0, len(train), 256):
            b = tensorize(train[i:i + 256])
            counts += np.bincount(b["input_ids"][maskable_positions(b)].numpy(), minlength=len(tokenizer))
        bench_training_step(args, tokenizer, model, batches, counts)


if __name__ == "__main__":
    main()
