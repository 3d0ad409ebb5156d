"""Batches of tokenized examples: padding (``collate``), an epoch's batches in the run's order (``epoch_batches``:
of similar lengths, ``length_grouped_batches``, or of a plain shuffle, ``random_batches``) and token counts, with the one ``PAD_MULTIPLE`` (and ``padded_width``) that the training
step and the time estimate both pad to.

Imports neither torch nor numpy at module level: the estimate (typhoon.runner.estimate) reads
``PAD_MULTIPLE`` in the grid's batch process, which loads neither; the functions import them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

PAD_MULTIPLE = 8  # batches padded to a multiple of 8: fewer distinct shapes, less kernel warm-up, better tiles


def padded_width(length: int) -> int:
    """The width of a batch whose longest row has ``length`` tokens (:func:`collate` with ``PAD_MULTIPLE``)."""
    return -(-length // PAD_MULTIPLE) * PAD_MULTIPLE


def collate(features: Sequence[dict], pad_token_id: int, pad_to_multiple_of: int = 1) -> dict[str, torch.Tensor]:
    """Pad a list of tokenized examples to the longest one (see docs/CONTRACTS.md for the keys).

    ``pad_to_multiple_of`` rounds the width up, which bounds the number of distinct batch shapes (each
    new shape costs a kernel warm-up in bf16 on CPU) and suits matrix units' tile sizes.
    """
    import torch

    if not features:
        raise ValueError("collate needs at least one example")
    width = max(len(f["input_ids"]) for f in features)
    width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    n = len(features)

    def padded(key: str, fill: int, dtype=torch.long) -> torch.Tensor:
        out = torch.full((n, width), fill, dtype=dtype)
        for row, f in enumerate(features):
            values = f[key]
            out[row, : len(values)] = torch.as_tensor(values, dtype=dtype)
        return out

    lengths = torch.as_tensor([len(f["input_ids"]) for f in features])
    batch = {
        "input_ids": padded("input_ids", pad_token_id),
        "attention_mask": (torch.arange(width) < lengths[:, None]).long(),
        "special_tokens_mask": padded("special_tokens_mask", 1, dtype=torch.bool),  # padding counts as special
        "word_ids": padded("word_ids", -1),
    }
    if "token_type_ids" in features[0]:
        batch["token_type_ids"] = padded("token_type_ids", 0)
    if "label" in features[0]:
        batch["labels"] = torch.as_tensor([f["label"] for f in features], dtype=torch.long)
    return batch


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, rng: np.random.Generator | None, mega_factor: int = 50
) -> list[np.ndarray]:
    """Index batches of similar length, so dynamic padding wastes little compute.

    The data is shuffled, cut into "mega-batches" of ``mega_factor * batch_size`` examples, each
    sorted by length and split into batches; batch order is shuffled again. With ``rng=None`` the
    order is deterministic (sorted within fixed mega-batches), which is what evaluation wants.
    """
    import numpy as np

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    lengths = np.asarray(lengths)
    order = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
    mega = batch_size * mega_factor
    batches = []
    for start in range(0, len(order), mega):
        chunk = order[start : start + mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def random_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Index batches of a plain shuffle of ``n`` examples, the last one short: transformers' ``RandomSampler``
    (the 2023 Typhoon code's data order), with no grouping by length."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = rng.permutation(n)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def epoch_batches(lengths: Sequence[int], batch_size: int, rng: np.random.Generator, order: str) -> list[np.ndarray]:
    """One training epoch's index batches in the run's ``batch_order``: ``length_grouped``
    (:func:`length_grouped_batches`) or ``random`` (:func:`random_batches`)."""
    if order == "random":
        return random_batches(len(lengths), batch_size, rng)
    if order != "length_grouped":  # RunConfig checks it against config.BATCH_ORDERS; this is for direct callers
        raise ValueError(f"batch_order must be 'length_grouped' or 'random', got {order!r}")
    return length_grouped_batches(lengths, batch_size, rng)


def token_counts(input_ids: Sequence[Sequence[int]], special_tokens_mask: Sequence[Sequence[int]],
                 vocab_size: int, *, special: bool = False) -> np.ndarray:
    """Counts f_v of every non-special token type in a tokenized corpus (Typhoon's calibration needs them);
    ``special=True``: the counts of the special tokens ([CLS], [SEP]) instead."""
    import numpy as np

    ids = np.fromiter((t for row in input_ids for t in row), dtype=np.int64)
    is_special = np.fromiter((s for row in special_tokens_mask for s in row), dtype=bool)
    return np.bincount(ids[is_special if special else ~is_special], minlength=vocab_size).astype(np.int64)
