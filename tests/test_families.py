"""Every backbone family with a tokenizer of its kind (byte-level BPE, SentencePiece Unigram, WordPiece):
word ids agree with the text, whole-word masking never splits a word, and a smoke cell runs end to end."""

import json

import pytest
import torch
from conftest import make_batch
from test_masking import word_is_split

from typhoon.cli import main
from typhoon.data.glue_files import load_glue
from typhoon.data.tokenizing import tokenize_glue
from typhoon.masking import get_strategy

N_PAIRS = 64


@pytest.fixture(scope="module")
def mrpc_pairs(glue_dir):
    raw = load_glue("mrpc", glue_dir)
    return raw.__class__({"train": raw["train"].select(range(N_PAIRS))})


def test_word_ids_agree_with_the_text(saved_backbone, mrpc_pairs):
    """A word is what the fast tokenizer's ``word_ids`` says; checked here against the raw text: a word
    is one contiguous run of tokens, never spans whitespace, and whitespace always starts a new word
    (RoBERTa's first word has no leading "Ġ" and still starts one); the second sentence continues the
    numbering of the first."""
    tokenizer = saved_backbone.tokenizer
    tokenized = tokenize_glue(mrpc_pairs, tokenizer, "mrpc")["train"]
    for example, pair in zip(tokenized, mrpc_pairs["train"], strict=True):
        texts = (pair["sentence1"], pair["sentence2"])
        enc = tokenizer(*texts, truncation=True, max_length=128, return_offsets_mapping=True)
        sequences, offsets, words = enc.sequence_ids(), enc["offset_mapping"], example["word_ids"]
        real = [i for i, s in enumerate(sequences) if s is not None]
        assert [words[i] for i in real] == sorted(words[i] for i in real)  # runs, in order, across both sentences
        assert words[real[0]] == 0 and all(words[i] == -1 for i, s in enumerate(sequences) if s is None)
        for i, j in zip(real, real[1:], strict=False):
            if sequences[i] != sequences[j]:
                assert words[j] == words[i] + 1  # a new sentence, a new word
                continue
            gap = texts[sequences[i]][offsets[i][1]:offsets[j][0]]
            if gap and not gap.isspace():
                pytest.fail(f"tokens {i}, {j} skip text {gap!r}")
            assert (words[j] != words[i]) if gap else (words[j] - words[i] in (0, 1))


def test_whole_word_masking_never_splits_a_word(saved_backbone, mrpc_pairs):
    tokenizer = saved_backbone.tokenizer
    batch = make_batch(tokenize_glue(mrpc_pairs, tokenizer, "mrpc")["train"], tokenizer, size=N_PAIRS)
    generator = torch.Generator().manual_seed(0)
    whole_word, token_level = get_strategy("whole_word", p=0.3), get_strategy("random", p=0.5)
    for _ in range(20):
        assert not word_is_split(whole_word.select(batch, generator), batch["word_ids"])
    assert word_is_split(token_level.select(batch, generator), batch["word_ids"])  # the detector detects


@pytest.mark.parametrize("saved_backbone", ["roberta"], indirect=True)
def test_roberta_prefix_space_changes_tokens_not_words(saved_backbone, mrpc_pairs):
    """With ``add_prefix_space`` the first word of each sentence gets RoBERTa's "Ġ" like every other
    word: other token ids, the same words."""
    from transformers import AutoTokenizer
    plain = saved_backbone.tokenizer
    spaced = AutoTokenizer.from_pretrained(saved_backbone.folder, add_prefix_space=True)
    assert plain.tokenize("Hello world") != spaced.tokenize("Hello world")
    assert spaced.tokenize("Hello world")[0].startswith("Ġ") and not plain.tokenize("Hello world")[0].startswith("Ġ")
    a, b = (tokenize_glue(mrpc_pairs, t, "mrpc", max_length=512)["train"] for t in (plain, spaced))  # untruncated
    assert a["input_ids"] != b["input_ids"]
    assert words_as_text(a, plain) == words_as_text(b, spaced)


def words_as_text(tokenized, tokenizer) -> list[list[str]]:
    """Per example, the text of each word (its tokens decoded together), in word-id order."""
    out = []
    for example in tokenized:
        ids, words = example["input_ids"], example["word_ids"]
        out.append([tokenizer.decode([t for t, w in zip(ids, words, strict=True) if w == word]).strip()
                    for word in range(max(words) + 1)])
    return out


@pytest.mark.slow
def test_a_smoke_cell_runs_end_to_end(saved_backbone, tmp_path):
    """``python -m typhoon run --backbone <folder> --profile smoke``: Typhoon masking (saliency through the
    gathered head), fine-tuning, a complete record. The command runs in this process: a subprocess would
    only add the ~10 s import of torch and transformers, six times."""
    assert main(["run", "--task", "mrpc", "--backbone", str(saved_backbone.folder), "--strategy", "typhoon",
                 "--profile", "smoke", "--out", str(tmp_path),
                 "--set", "max_train_examples=64", "--set", "max_eval_examples=32"]) == 0
    [record] = tmp_path.glob("runs/mrpc/*/typhoon/seed0")
    metrics = json.loads((record / "metrics.json").read_text())
    assert json.loads((record / "config.json").read_text())["backbone"] == str(saved_backbone.folder)
    assert metrics["status"] == "ok" and metrics["n_train"] == 64 and metrics["timing"]["mlm_steps"] == 4
    assert 0 <= metrics["final"]["dev_f1"] <= 1
    assert 0 < metrics["masking"]["kl_to_uniform"] < 1  # the saliency moved the masking distribution
