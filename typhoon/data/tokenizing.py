"""Tokenizing a GLUE split: the text columns of a task, and tokenized examples with word ids (whole-word
and span masking group subwords by them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typhoon.data.glue_files import TaskSpec, get_task

if TYPE_CHECKING:  # only annotations here: the DatasetDict's own methods do the work (Arrow loads with it)
    import datasets


def text_pairs(dataset: datasets.Dataset, spec: TaskSpec) -> tuple[list[str], list[str] | None]:
    """The text column(s) of a split as python lists (second is None for single-sentence tasks)."""
    cols = spec.normalized_text_columns
    first = dataset[cols[0]]
    return list(first), (list(dataset[cols[1]]) if spec.is_pair else None)


def tokenize_glue(
    dataset_dict: datasets.DatasetDict, tokenizer, task: str, max_length: int = 128
) -> datasets.DatasetDict:
    """Tokenize every split, keeping word ids (for whole-word and span masking) and lengths.

    Adds ``input_ids``, ``token_type_ids`` (if the tokenizer makes them), ``special_tokens_mask``,
    ``word_ids`` (-1 at special tokens; the second sentence continues the numbering of the first)
    and ``length``. Nothing is padded here: batches are padded dynamically by :func:`collate`.
    """
    spec = get_task(task)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("tokenize_glue needs a fast tokenizer (it reads word ids from the encodings)")

    def encode(batch):
        cols = spec.normalized_text_columns
        enc = tokenizer(
            *(batch[c] for c in cols), truncation=True, max_length=max_length,
            return_special_tokens_mask=True,
        )
        word_ids = []
        for i in range(len(enc["input_ids"])):
            words, sequences = enc.word_ids(i), enc.sequence_ids(i)
            first_words = max((w for w, s in zip(words, sequences, strict=True) if s == 0 and w is not None),
                              default=-1) + 1
            word_ids.append([
                -1 if w is None else (w + first_words if s == 1 else w)
                for w, s in zip(words, sequences, strict=True)
            ])
        out = {k: enc[k] for k in ("input_ids", "token_type_ids", "special_tokens_mask") if k in enc}
        out["word_ids"] = word_ids
        out["length"] = [len(ids) for ids in enc["input_ids"]]
        return out

    return dataset_dict.map(encode, batched=True, desc=f"tokenize {spec.name}")
