"""Masking throughput: our strategies versus transformers' DataCollatorForLanguageModeling.

Same tokenized MRPC train batches for everybody (B=32, padded to 128). Two views of HF:
``collator``, the full call on a list of feature dicts (what a DataLoader runs: tensorizing plus
masking), and ``mask only``, its ``torch_mask_tokens`` on ready tensors. Ours: the strategy call
(selection + 80/10/10 corruption) on a ready padded batch, and ``+ collate`` which adds the
project's list-to-tensor collation (``typhoon.data.batching.collate``) of the same pre-padded features, the
counterpart of the HF collator call. Whole-word in transformers 5.x needs ``offset_mapping``.
Note: HF whole-word selects each word with probability p, and also disables the 80/10/10 rule
(all [MASK]); ours keeps 80/10/10.

    .venv/bin/python benchmarks/bench_masking.py [--batches 32] [--repeats 7] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from transformers import DataCollatorForLanguageModeling  # noqa: E402

from typhoon.data.batching import collate  # noqa: E402
from typhoon.data.glue_files import load_glue  # noqa: E402
from typhoon.masking import get_strategy, maskable_positions  # noqa: E402
from typhoon.models.backbones import load_tokenizer, minilm_dir  # noqa: E402

BATCH_SIZE = 32


def mrpc_features(tokenizer, n_examples: int, max_length: int) -> list[dict[str, list[int]]]:
    """Tokenized MRPC train pairs padded to ``max_length``, with offsets (for HF) and word ids (for us)."""
    train = load_glue("mrpc")["train"].select(range(n_examples))
    enc = tokenizer(list(train["sentence1"]), list(train["sentence2"]), truncation=True, max_length=max_length,
                    padding="max_length", return_special_tokens_mask=True, return_offsets_mapping=True)
    features = []
    for i in range(n_examples):
        words, sequences = enc.word_ids(i), enc.sequence_ids(i)
        first = max((w for w, s in zip(words, sequences, strict=True) if s == 0 and w is not None), default=-1) + 1
        word_ids = [-1 if w is None else (w + first if s == 1 else w) for w, s in zip(words, sequences, strict=True)]
        features.append({
            "input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
            "attention_mask": enc["attention_mask"][i], "special_tokens_mask": enc["special_tokens_mask"][i],
            "offset_mapping": enc["offset_mapping"][i], "word_ids": word_ids,
        })
    return features


def tensorize(features: list[dict]) -> dict[str, torch.Tensor]:
    """A padded batch in the contract's layout (padding counts as special)."""
    batch = {k: torch.from_numpy(np.array([f[k] for f in features], dtype=np.int64)) for k in
             ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask", "word_ids")}
    batch["special_tokens_mask"] = batch["special_tokens_mask"].bool() | (batch["attention_mask"] == 0)
    return batch


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items) - size + 1, size)]


def throughput(fn, n_batches: int, repeats: int) -> float:
    """Examples per second: one warm-up pass, then the median over ``repeats`` timed passes."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return n_batches * BATCH_SIZE / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    tokenizer = load_tokenizer(minilm_dir())
    mask_id, vocab = tokenizer.mask_token_id, len(tokenizer)
    features = mrpc_features(tokenizer, args.batches * BATCH_SIZE, max_length=128)
    feature_batches = chunks(features, BATCH_SIZE)
    hf_keys = ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask")
    hf_features = [[{k: f[k] for k in hf_keys} for f in fb] for fb in feature_batches]
    hf_ww_features = [[{k: f[k] for k in (*hf_keys, "offset_mapping")} for f in fb] for fb in feature_batches]
    batches = [tensorize(fb) for fb in feature_batches]
    offsets = [torch.tensor([f["offset_mapping"] for f in fb]) for fb in feature_batches]

    hf_random = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0)
    hf_whole = DataCollatorForLanguageModeling(tokenizer, whole_word_mask=True, seed=0)
    for collator in (hf_random, hf_whole):
        collator.create_rng("pt")

    counts = np.zeros(vocab, dtype=np.int64)
    for b in batches:
        counts += np.bincount(b["input_ids"][maskable_positions(b)].numpy(), minlength=vocab)
    ours = {name: get_strategy(name) for name in ("random", "whole_word", "span", "typhoon")}
    ours["typhoon"].prepare(counts)
    g = torch.Generator().manual_seed(0)
    for b in batches:  # give Typhoon non-uniform probabilities (fake saliency; the cost is the same)
        ours["typhoon"].update(b, ours["typhoon"].select(b, g), torch.randn(b["input_ids"].shape, generator=g))

    our_keys = ("input_ids", "token_type_ids", "special_tokens_mask", "word_ids")
    our_features = [[{k: f[k] for k in our_keys} for f in fb] for fb in feature_batches]

    def run_ours(name, with_collate=False):
        strategy = ours[name]

        def fn():
            source = our_features if with_collate else batches
            for item in source:
                batch = collate(item, tokenizer.pad_token_id) if with_collate else item
                strategy(batch, g, mask_token_id=mask_id, vocab_size=vocab)
        return fn

    def run_hf_collator(collator, feats):
        def fn():
            for fb in feats:
                collator(fb)
        return fn

    def run_hf_mask_only(collator, whole_word):
        def fn():
            for b, off in zip(batches, offsets, strict=True):
                collator.torch_mask_tokens(b["input_ids"].clone(), special_tokens_mask=b["special_tokens_mask"],
                                           offset_mapping=off if whole_word else None)
        return fn

    cases = [
        ("HF random (collator)", run_hf_collator(hf_random, hf_features)),
        ("HF random (mask only)", run_hf_mask_only(hf_random, False)),
        ("ours random", run_ours("random")),
        ("ours random + collate", run_ours("random", True)),
        ("HF whole-word (collator)", run_hf_collator(hf_whole, hf_ww_features)),
        ("HF whole-word (mask only)", run_hf_mask_only(hf_whole, True)),
        ("ours whole_word", run_ours("whole_word")),
        ("ours whole_word + collate", run_ours("whole_word", True)),
        ("ours span", run_ours("span")),
        ("ours typhoon (sampling)", run_ours("typhoon")),
    ]
    print(f"MRPC train, {args.batches} batches x {BATCH_SIZE}, padded to 128; median of {args.repeats} passes")
    print(f"torch {torch.__version__}; examples/s (higher is better)\n")
    header = f"{'method':32s}" + "".join(f"{f'threads={t}':>14s}" for t in args.threads)
    print(header)
    print("-" * len(header))
    results: dict[str, list[float]] = {}
    for label, fn in cases:
        row = []
        for threads in args.threads:
            torch.set_num_threads(threads)
            row.append(throughput(fn, len(batches), args.repeats))
        results[label] = row
        print(f"{label:32s}" + "".join(f"{v:14,.0f}" for v in row))
    print()
    for ours_label, hf_label in [("ours random", "HF random (collator)"),
                                 ("ours random + collate", "HF random (collator)"),
                                 ("ours random", "HF random (mask only)"),
                                 ("ours whole_word", "HF whole-word (collator)"),
                                 ("ours whole_word + collate", "HF whole-word (collator)"),
                                 ("ours whole_word", "HF whole-word (mask only)")]:
        ratios = [a / b for a, b in zip(results[ours_label], results[hf_label], strict=True)]
        print(f"{ours_label} / {hf_label}: " + ", ".join(f"{r:.1f}x" for r in ratios))


if __name__ == "__main__":
    main()
