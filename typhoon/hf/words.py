"""Special tokens and whole words of token ids that a ``Trainer`` hands a collator, read from the fast tokenizer.

A ``Trainer`` drops every dataset column its model's ``forward`` does not take, so a collator sees
``input_ids`` (with ``attention_mask``, ``token_type_ids``) but neither ``special_tokens_mask`` nor the
encodings' word ids that whole-word and span masking group word-pieces by. Both are derived here from the
ids alone, with the tokenizer's own pipeline, so that no ``remove_unused_columns=False`` is needed:

- **special tokens**: the ids of the tokenizer's special tokens ([CLS], [SEP], <s>, padding, ...) but its
  unknown token, which stands for real text. (A literal "[SEP]" typed in the text counts as special here,
  where the encodings would call it text; pass a ``special_tokens_mask`` column to keep theirs.)
- **word ids**: each run of non-special tokens (a sentence of a pair) is decoded and encoded again by the
  fast tokenizer (its normalizer, pre-tokenizer and model), whose ``word_ids`` then say which word each token
  belongs to: WordPiece, byte-level BPE and SentencePiece alike, with no rule about '##' or 'Ġ'. Where the
  round trip gives other ids (a word cut by truncation, mostly at a sentence's end), the tokens from the first
  difference on are counted as one word. Words are numbered from 0 through the row, the second sentence of a
  pair going on from the first (as :func:`typhoon.data.tokenizing.tokenize_glue` numbers them); special
  tokens get -1. A run is encoded once: later epochs read it from a cache.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def special_ids(tokenizer) -> frozenset[int]:
    """The ids counted as special tokens: the tokenizer's special tokens but its unknown token."""
    return frozenset(tokenizer.all_special_ids) - {tokenizer.unk_token_id}


class WordIds:
    """Special-token masks and word ids of token-id rows, for one fast tokenizer (see the module docstring)."""

    def __init__(self, tokenizer, cache_size: int = 200_000):
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"{type(tokenizer).__name__} is not a fast tokenizer: whole words come from a fast "
                             "tokenizer's word ids (load it with AutoTokenizer.from_pretrained(..., use_fast=True))")
        self.tokenizer = tokenizer
        self.special_ids = special_ids(tokenizer)
        self.cache_size = cache_size
        self._cache: dict[tuple[int, ...], list[int]] = {}

    def rows(self, rows: Sequence[Sequence[int]]) -> list[list[int]]:
        """The word ids of each row of token ids (-1 at special tokens), words numbered through the row."""
        runs = [self._runs(row) for row in rows]
        todo = list({ids for row_runs in runs for _, ids in row_runs if ids not in self._cache})
        if todo:
            self._encode(todo)
        out = []
        for row, row_runs in zip(rows, runs, strict=True):
            words, offset = [-1] * len(row), 0
            for start, ids in row_runs:
                local = self._cache[ids]
                words[start:start + len(ids)] = [w + offset for w in local]
                offset += max(local) + 1
            out.append(words)
        return out

    def _runs(self, row: Sequence[int]) -> list[tuple[int, tuple[int, ...]]]:
        """(start, ids) of each maximal run of non-special tokens of ``row``."""
        runs, start = [], None
        for i, t in enumerate([*row, None]):
            inside = t is not None and t not in self.special_ids
            if inside and start is None:
                start = i
            elif not inside and start is not None:
                runs.append((start, tuple(int(x) for x in row[start:i])))
                start = None
        return runs

    def _encode(self, runs: list[tuple[int, ...]]) -> None:
        """Word ids of each run, numbered from 0, into the cache."""
        if len(self._cache) + len(runs) > self.cache_size:
            self._cache.clear()
        backend = self.tokenizer.backend_tokenizer
        texts = backend.decode_batch([list(ids) for ids in runs], skip_special_tokens=False)
        for ids, encoding in zip(runs, backend.encode_batch(texts, add_special_tokens=False), strict=True):
            again, words = encoding.ids, encoding.word_ids
            local = list(words) if list(ids) == again else realigned(list(ids), again, words)
            self._cache[ids] = dense(local)


def realigned(ids: list[int], again: list[int], words: list[int | None]) -> list[int]:
    """Word ids of ``ids`` from an encoding of their decoded text that gave other ids (``again``, ``words``):
    where the two agree, the encoding's word; a stretch it tokenized otherwise (a word cut by truncation) takes
    the word of its first differing token there; tokens it dropped (the space piece before an unknown token)
    join the word that follows them."""
    out: list[int] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ids, again, autojunk=False).get_opcodes():
        if tag == "equal":
            out += [w if w is not None else (out[-1] if out else 0) for w in words[j1:j2]]
        elif tag in ("replace", "delete"):
            word = words[j1] if j1 < len(words) else None
            out += [word if word is not None else (out[-1] + 1 if out else 0)] * (i2 - i1)
    return out


def dense(words: list[int]) -> list[int]:
    """Word ids renumbered 0, 1, 2, ... in order of first appearance (an encoding may skip numbers)."""
    seen: dict[int, int] = {}
    return [seen.setdefault(w, len(seen)) for w in words]
