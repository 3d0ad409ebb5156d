"""A run's examples: the task's tokenized train and dev splits, capped as the config says, and the dev
split's evaluation batches (the same for every seed)."""

from __future__ import annotations

from typhoon.config import RunConfig
from typhoon.data import (
    PAD_MULTIPLE,
    collate,
    length_grouped_batches,
    load_glue,
    require_labelled_splits,
    tokenize_glue,
)


def prepare_data(config: RunConfig, tokenizer) -> dict:
    """Tokenized train/dev examples as lists of dicts (cheap to batch), capped as the config says."""
    raw = load_glue(config.task, declaration=config.task_declaration)  # a declared task's files: still those planned
    require_labelled_splits(raw, config.task)
    caps = {"train": config.max_train_examples, "validation": config.max_eval_examples}
    raw = raw.__class__({s: raw[s].select(range(min(caps[s] or len(raw[s]), len(raw[s])))) for s in caps})
    tokenized = tokenize_glue(raw, tokenizer, config.task, config.max_length)
    keep = [c for c in ("input_ids", "token_type_ids", "special_tokens_mask", "word_ids", "label")
            if c in tokenized["train"].column_names]
    return {split: tokenized[split].select_columns(keep).to_list() for split in ("train", "validation")}


def eval_batches(examples: list[dict], config: RunConfig, pad_token_id: int) -> list[dict]:
    """Padded evaluation batches in a fixed, seed-independent order (grouped by length)."""
    lengths = [len(x["input_ids"]) for x in examples]
    return [collate([examples[i] for i in idx], pad_token_id, PAD_MULTIPLE)
            for idx in length_grouped_batches(lengths, config.eval_batch_size, None)]
