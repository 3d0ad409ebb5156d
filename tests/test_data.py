"""GLUE loading against the official file counts and label balances (SOURCES.md), where it looks, and tokenization."""

import collections
import os
import subprocess
import sys

import pytest

from typhoon.data.batching import collate, length_grouped_batches, token_counts
from typhoon.data.glue_files import BUNDLED_GLUE_DIR, GlueSource, get_task, load_glue, locate_glue


@pytest.mark.parametrize(
    "task, sizes, train_balance, dev_balance",
    [
        ("mrpc", (3668, 408, 1725), {1: 2474, 0: 1194}, {1: 279, 0: 129}),
        ("CoLA", (8551, 1043, 1063), {1: 6023, 0: 2528}, {1: 721, 0: 322}),
    ],
)
def test_official_counts(glue_dir, task, sizes, train_balance, dev_balance):
    data = load_glue(task, glue_dir)
    assert (len(data["train"]), len(data["validation"]), len(data["test"])) == sizes
    assert collections.Counter(data["train"]["label"]) == train_balance
    assert collections.Counter(data["validation"]["label"]) == dev_balance
    assert set(data["test"]["label"]) == {-1}


def test_mrpc_bom_and_bare_quotes(glue_dir):
    train = load_glue("mrpc", glue_dir)["train"]
    assert train.column_names == ["sentence1", "sentence2", "label", "idx"]
    assert train[0]["sentence1"].startswith("Amrozi accused his brother")
    assert '" the witness "' in train[0]["sentence1"]  # bare quotes are kept, not parsed as CSV quoting
    # the row that a widespread copy of train.tsv lacks (SOURCES.md)
    assert train[91]["sentence1"].startswith("Officials at Brandeis said")
    assert train.features["label"].names == ["not_equivalent", "equivalent"]


def test_cola_dev_without_trailing_newline(glue_dir):
    dev = load_glue("cola", glue_dir)["validation"]
    last = (glue_dir / "CoLA" / "dev.tsv").read_text().split("\n")[-1].split("\t")[3]
    assert dev[len(dev) - 1]["sentence"] == last


def test_env_var_is_used(glue_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(_copy_task(glue_dir, "MRPC", tmp_path)))
    assert locate_glue("MRPC") == GlueSource("$TYPHOON_GLUE_DIR", tmp_path / "MRPC")
    assert len(load_glue("MRPC")["validation"]) == 408


def test_task_names():
    assert get_task("SST-2").name == "sst2"
    assert get_task("cola").metric == "mcc" and get_task("mrpc").metric == "f1"
    with pytest.raises(ValueError, match="unknown GLUE task 'stsx'.*cola"):
        get_task("stsx")


def _copy_task(glue_dir, folder, root):
    (root / folder).mkdir(parents=True)
    for path in (glue_dir / folder).glob("*.tsv"):
        (root / folder / path.name).write_bytes(path.read_bytes())
    return root


@pytest.mark.slow  # a fresh interpreter in another folder
def test_bundled_data_is_found_from_any_folder(tmp_path):
    """No TYPHOON_GLUE_DIR, another working directory, the hub off: the bundle inside the package is used."""
    env = {k: v for k, v in os.environ.items() if k != "TYPHOON_GLUE_DIR"} | {"HF_HUB_OFFLINE": "1"}
    code = ("from typhoon.data.glue_files import load_glue, locate_glue; d = load_glue('cola'); "
            "print(locate_glue('cola').origin, len(d['train']), len(d['validation']), len(d['test']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["bundled", "8551", "1043", "1063"]


def test_search_order(glue_dir, tmp_path, monkeypatch):
    argument, env = _copy_task(glue_dir, "MRPC", tmp_path / "arg"), _copy_task(glue_dir, "CoLA", tmp_path / "env")
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(env))
    assert locate_glue("mrpc", argument) == GlueSource("data_dir", argument / "MRPC")  # the argument first
    assert locate_glue("cola", argument) == GlueSource("$TYPHOON_GLUE_DIR", env / "CoLA")  # it lacks CoLA
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(argument))
    assert locate_glue("cola") == GlueSource("bundled", BUNDLED_GLUE_DIR / "CoLA")  # neither has it
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    assert locate_glue("rte") == GlueSource("hub", None)  # the hub last (not contacted here)


def test_a_folder_that_does_not_exist_is_pointed_out(glue_dir, tmp_path):
    with pytest.warns(UserWarning, match=r"nowhere.*does not exist"):
        assert locate_glue("mrpc", tmp_path / "nowhere").origin == "bundled"


def test_a_half_present_task_folder_is_refused(tmp_path):
    (tmp_path / "MRPC").mkdir()
    (tmp_path / "MRPC" / "dev.tsv").write_text("x")
    with pytest.raises(FileNotFoundError, match=r"MRPC.*train\.tsv"):
        load_glue("mrpc", tmp_path)


def test_not_found_names_every_place_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(tmp_path))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as caught:
        load_glue("rte")
    message = str(caught.value)
    assert "data_dir: not given" in message
    assert f"$TYPHOON_GLUE_DIR: {tmp_path} has no RTE/ folder" in message
    assert f"bundled: {BUNDLED_GLUE_DIR} has no RTE/ folder" in message
    assert "hub nyu-mll/glue: switched off" in message
    assert "Fix: python -m typhoon data fetch rte" in message


def _write_mrpc(tmp_path, train_text):
    folder = tmp_path / "MRPC"
    folder.mkdir()
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    (folder / "train.tsv").write_text(header + train_text, encoding="utf-8")
    (folder / "dev.tsv").write_text(header + "1\t1\t2\ta b\tc d\n", encoding="utf-8")
    return tmp_path


def test_malformed_rows_name_file_and_line(tmp_path):
    root = _write_mrpc(tmp_path, "1\t1\t2\ta b\tc d\n0\t3\t4\tonly three\n")
    with pytest.raises(ValueError, match=r"train\.tsv, line 3: expected 5 tab-separated columns, found 4"):
        load_glue("mrpc", root)


def test_bad_label_names_file_and_line(tmp_path):
    root = _write_mrpc(tmp_path, "1\t1\t2\ta b\tc d\n7\t3\t4\te f\tg h\n")
    with pytest.raises(ValueError, match=r"train\.tsv, line 3: bad label '7'"):
        load_glue("mrpc", root)


def test_empty_split_is_refused(tmp_path):
    root = _write_mrpc(tmp_path, "")
    with pytest.raises(ValueError, match="no data rows"):
        load_glue("mrpc", root)


def test_word_ids_follow_the_tokenizer(mrpc_tokenized, tokenizer):
    example = mrpc_tokenized["train"][0]
    enc = tokenizer(load_glue("mrpc")["train"][0]["sentence1"], load_glue("mrpc")["train"][0]["sentence2"])
    assert example["input_ids"] == enc["input_ids"]
    words, seqs = enc.word_ids(), enc.sequence_ids()
    first = max(w for w, s in zip(words, seqs, strict=True) if s == 0) + 1
    expected = [-1 if w is None else w + (first if s == 1 else 0) for w, s in zip(words, seqs, strict=True)]
    assert example["word_ids"] == expected
    # special tokens are exactly where word ids are -1
    assert [w == -1 for w in example["word_ids"]] == [bool(s) for s in example["special_tokens_mask"]]


def test_collate_pads_dynamically(mrpc_tokenized, tokenizer):
    rows = [mrpc_tokenized["train"][i] for i in range(5)]
    batch = collate(rows, tokenizer.pad_token_id, pad_to_multiple_of=8)
    width = max(len(r["input_ids"]) for r in rows)
    assert batch["input_ids"].shape[1] == -(-width // 8) * 8
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        assert batch["attention_mask"][i].sum() == n
        assert batch["input_ids"][i, n:].eq(tokenizer.pad_token_id).all()
        assert batch["special_tokens_mask"][i, n:].all() and batch["word_ids"][i, n:].eq(-1).all()
    assert batch["labels"].tolist() == [r["label"] for r in rows]


def test_length_grouped_batches_cover_everything_once():
    import numpy as np

    lengths = np.random.default_rng(0).integers(5, 100, size=1000)
    batches = length_grouped_batches(lengths, 32, np.random.default_rng(1))
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1000))
    spread = np.mean([lengths[b].max() - lengths[b].min() for b in batches])
    assert spread < 10  # similar lengths within a batch (random batches would spread ~90)
    again = length_grouped_batches(lengths, 32, np.random.default_rng(1))
    assert all((a == b).all() for a, b in zip(batches, again, strict=True))


def test_token_counts_skip_specials():
    counts = token_counts([[101, 5, 5, 102], [101, 7, 102, 0]], [[1, 0, 0, 1], [1, 0, 1, 1]], 200)
    assert counts[5] == 2 and counts[7] == 1 and counts[101] == 0 and counts.sum() == 3
