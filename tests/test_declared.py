"""A task and a backbone short name of the user's own, declared in a profiles file of $TYPHOON_PROFILES
(typhoon/declared.py): what a declaration reads as (its rows against a plain reading of the file), each bad field
refused by the command line naming the file, the table and the field (under 2 s, nothing written), and what a run of
a declared task or backbone name holds in its identity (its files' sha256, what the name stands for)."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from typhoon import names
from typhoon.cli import main
from typhoon.config import RunConfig

# a small sentiment set written here: (text, verdict)
REVIEWS = [("a delight from start to finish", "good"), ("cold food and rude service", "bad"),
           ('the "deluxe" room was a broom cupboard', "bad"), ("warm, funny and well made", "good"),
           ("it broke after two days", "bad"), ("fast delivery, solid build", "good")]
TASK = {"train": "reviews_train.csv", "dev": "reviews_dev.csv", "text_columns": ["review"],
        "label_column": "verdict", "labels": ["bad", "good"], "metric": "accuracy"}


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return json.dumps(value)  # a string or a number, as TOML writes them


def write_profiles(path: Path, tasks: dict | None = None, backbones: dict | None = None) -> Path:
    """A profiles file holding ``[tasks.<name>]`` and ``[backbones.<name>]`` tables."""
    lines = []
    for kind, tables in (("tasks", tasks or {}), ("backbones", backbones or {})):
        for name, table in tables.items():
            lines += [f"[{kind}.{json.dumps(name)}]", *(f"{key} = {toml_value(v)}" for key, v in table.items()), ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_reviews(folder: Path, rows=REVIEWS, train="reviews_train.csv", dev="reviews_dev.csv") -> None:
    for name, part in ((train, rows), (dev, rows[:4])):
        with open(folder / name, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["review", "verdict"])
            writer.writerows(part)


@pytest.fixture()
def declared(tmp_path, monkeypatch):
    """A folder with the reviews task's files and a profiles file declaring it (``reviews``) and a backbone name
    (``my-tiny``, the built-in tiny-random), named in $TYPHOON_PROFILES."""
    folder = tmp_path / "mine"
    folder.mkdir()
    write_reviews(folder)
    profiles = write_profiles(folder / "my_profiles.toml", {"reviews": TASK},
                              {"my-tiny": {"source": "tiny-random", "description": "tiny-random, my name for it"}})
    monkeypatch.setenv("TYPHOON_PROFILES", str(profiles))
    return folder


# --- what a declaration reads as ---------------------------------------------------------------------------------

def test_a_declared_csv_task_reads_as_its_rows(declared):
    from typhoon.data.task_files import read_task_file

    task = names.task_spec("Reviews")  # any case, as a GLUE task's name
    assert (task.name, task.format, task.metric, task.num_labels, task.is_pair) == ("reviews", "csv", "accuracy", 2, False)
    columns, digest = read_task_file(task, "train")
    with open(declared / "reviews_train.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))  # the reference: the csv module's own reading of the file
    assert columns["sentence"] == [row["review"] for row in rows]
    assert columns["sentence"][2] == 'the "deluxe" room was a broom cupboard'  # quotes are CSV quoting, undone
    assert columns["label"] == [{"bad": 0, "good": 1}[row["verdict"]] for row in rows]
    assert digest == hashlib.sha256((declared / "reviews_train.csv").read_bytes()).hexdigest()


def test_a_headerless_tsv_pair_task_reads_tabs_exactly(tmp_path, monkeypatch):
    """TSV as the GLUE files are read: split on tabs, a bare quote is text; columns by number without a header."""
    from typhoon.data.task_files import read_task_file

    lines = ['1\tA man "plays" a guitar.\tSomeone plays music.', "0\tA cat sleeps.\tA dog barks loudly.",
             "1\tTwo kids run.\tChildren are running."]
    for name in ("pairs_train.tsv", "pairs_dev.tsv"):
        (tmp_path / name).write_text("\n".join(lines) + "\n\n", encoding="utf-8")  # a blank line at the end
    monkeypatch.setenv("TYPHOON_PROFILES", str(write_profiles(tmp_path / "p.toml", {"pairs": {
        "train": "pairs_train.tsv", "dev": "pairs_dev.tsv", "header": False, "text_columns": [1, 2],
        "label_column": 0, "labels": [0, 1], "metric": "f1"}})))
    task = names.task_spec("pairs")
    columns, _ = read_task_file(task, "dev")
    assert task.is_pair and task.label_names == ("0", "1")
    assert columns == {"sentence1": [line.split("\t")[1] for line in lines],
                       "sentence2": [line.split("\t")[2] for line in lines],
                       "label": [int(line.split("\t")[0]) for line in lines], "idx": [0, 1, 2]}


def test_a_json_lines_task_loads_as_a_dataset_with_its_label_names(tmp_path, monkeypatch):
    from typhoon.data import get_task, load_glue

    objects = [{"premise": "It rains.", "claim": "The street is wet.", "gold": "entails"},
               {"premise": "It rains.", "claim": "The sun is out.", "gold": "contradicts"},
               {"premise": "A bell rings.", "claim": "It is noon.", "gold": "neutral", "source": "mine"}]
    for name in ("nli_train.jsonl", "nli_dev.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    monkeypatch.setenv("TYPHOON_PROFILES", str(write_profiles(tmp_path / "p.toml", {"tiny-nli": {
        "train": "nli_train.jsonl", "dev": "nli_dev.jsonl", "text_columns": ["premise", "claim"],
        "label_column": "gold", "labels": ["entails", "neutral", "contradicts"], "metric": "mcc",
        "description": "three hand-made pairs"}})))
    splits = load_glue("tiny-nli")
    assert sorted(splits) == ["train", "validation"] and len(splits["train"]) == len(objects)
    assert splits["validation"].features["label"].names == ["entails", "neutral", "contradicts"]
    assert splits["train"]["label"] == [0, 2, 1]
    assert splits["train"]["sentence2"] == [o["claim"] for o in objects]
    assert get_task("tiny-nli").metric == "mcc"


def test_a_declared_task_is_scored_by_its_metric(tmp_path, monkeypatch):
    """Its metric is the one the declaration names, scikit-learn's Matthews correlation over three labels."""
    from sklearn.metrics import matthews_corrcoef

    from typhoon.data import glue_metrics

    for name in ("t.csv", "d.csv"):
        (tmp_path / name).write_text("text,y\nred,r\ngreen,g\nblue,b\n", encoding="utf-8")
    monkeypatch.setenv("TYPHOON_PROFILES", str(write_profiles(tmp_path / "p.toml", {"colours": {
        "train": "t.csv", "dev": "d.csv", "text_columns": ["text"], "label_column": "y", "labels": ["r", "g", "b"],
        "metric": "mcc"}})))
    labels, predictions = [0, 1, 2, 2, 1, 0, 1], [0, 2, 2, 1, 1, 0, 0]
    scores = glue_metrics("colours", labels, predictions)
    assert scores["mcc"] == pytest.approx(matthews_corrcoef(labels, predictions))
    assert scores["accuracy"] == pytest.approx(4 / 7)


def test_a_declared_backbone_name_stands_for_its_source(declared, tmp_path):
    assert names.check_backbone("My-Tiny") == "backbone 'My-Tiny' read as 'my-tiny'"
    assert names.backbone_spec("my-tiny").source == "tiny-random"
    checkpoint = declared / "checkpoints" / "mine"
    checkpoint.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        (checkpoint / name).write_text("{}")
    write_profiles(declared / "my_profiles.toml", {"reviews": TASK},
                   {"my-tiny": {"source": "tiny-random"}, "my-bert": {"source": "checkpoints/mine"},
                    "hub-bert": {"source": "prajjwal1/bert-tiny"}})
    assert names.backbone_spec("my-bert").source == str(checkpoint)  # read from the profiles file's folder
    assert names.backbone_spec("hub-bert").source == "prajjwal1/bert-tiny"
    assert not names.backbone_spec("hub-bert").offline and names.backbone_spec("my-bert").offline


def test_a_declared_backbone_name_loads_the_backbone_it_names(declared):
    from typhoon.models import load_backbone

    mine, builtin = load_backbone("my-tiny"), load_backbone("tiny-random")
    assert mine.name == "my-tiny" and mine.source is None
    assert mine.config.to_dict() == builtin.config.to_dict() and mine.config.hidden_size == 64  # tiny-random: H=64
    assert names.mlm_head_of("my-tiny") == "random weights: a pipeline check (tiny-random)"  # the report's line


# --- what a run of one holds -------------------------------------------------------------------------------------

def test_a_run_of_a_declared_task_holds_its_files_sha256(declared):
    config = RunConfig(task="reviews", backbone="my-tiny", profile="mine")
    sha = {split: hashlib.sha256((declared / f"reviews_{split}.csv").read_bytes()).hexdigest()
           for split in ("train", "dev")}
    assert config.task_declaration == {"format": "csv", "header": True, "text_columns": ["review"],
                                       "label_column": "verdict", "labels": ["bad", "good"], "metric": "accuracy",
                                       "sha256": sha}
    assert config.backbone_source == "tiny-random"
    stored = json.loads(json.dumps(config.to_dict()))  # as config.json holds it
    assert stored["task_declaration"]["sha256"] == sha and stored["backbone_source"] == "tiny-random"
    assert RunConfig.from_dict(stored).run_id() == config.run_id()
    assert config.replace(task="mrpc").to_dict().keys() == RunConfig(backbone="my-tiny").to_dict().keys()


def test_a_changed_file_is_another_run_and_moved_files_are_the_same(declared, tmp_path, monkeypatch):
    from typhoon.data import load_glue
    from typhoon.records import run_record

    before = RunConfig(task="reviews", backbone="tiny-random")
    run_dir = tmp_path / "out" / before.relative_dir()
    run_record.write_record(run_dir, before, {"status": "ok"})
    assert run_record.why_incomplete(run_dir, before) is None
    moved = tmp_path / "moved"
    shutil.copytree(declared, moved)
    write_profiles(moved / "my_profiles.toml", {"reviews": {**TASK, "description": "the same files, elsewhere"}})
    monkeypatch.setenv("TYPHOON_PROFILES", str(moved / "my_profiles.toml"))
    assert RunConfig(task="reviews", backbone="tiny-random").run_id() == before.run_id()
    monkeypatch.setenv("TYPHOON_PROFILES", str(declared / "my_profiles.toml"))
    write_reviews(declared, REVIEWS[:5])  # a row less
    after = RunConfig(task="reviews", backbone="tiny-random")
    assert after.task_declaration["sha256"]["train"] != before.task_declaration["sha256"]["train"]
    assert "the record is of another run" in run_record.why_incomplete(run_dir, after)  # trained again
    assert run_record.read_config(run_dir).task_declaration == before.task_declaration  # the record keeps its own
    with pytest.raises(ValueError, match=r"task reviews .* changed since this run was planned: train .*reviews_train"):
        load_glue("reviews", declaration=before.task_declaration)  # a run planned on the old files refuses the new
    assert len(load_glue("reviews", declaration=after.task_declaration)["train"]) == 5
    write_profiles(declared / "my_profiles.toml", {"reviews": {**TASK, "labels": ["good", "bad"]}})
    assert RunConfig(task="reviews", backbone="tiny-random").run_id() != after.run_id()  # labels numbered otherwise


def test_a_repointed_backbone_name_is_another_run(declared):
    first = RunConfig(task="reviews", backbone="my-tiny")
    write_profiles(declared / "my_profiles.toml", {"reviews": TASK}, {"my-tiny": {"source": "tinybert-shape"}})
    second = RunConfig(task="reviews", backbone="my-tiny")
    assert (first.backbone_source, second.backbone_source) == ("tiny-random", "tinybert-shape")
    assert first.run_id() != second.run_id()


def test_a_builtin_task_and_backbone_keep_their_config_and_identity(declared):
    """Beside a declared task, a GLUE task's config has neither field: its record and identity are what they were."""
    config = RunConfig(task="mrpc", backbone="tiny-random")
    assert not {"task_declaration", "backbone_source"} & set(config.to_dict())
    with pytest.raises(ValueError, match="task_declaration is a declared task's; 'mrpc' is a GLUE task"):
        RunConfig(task="mrpc", task_declaration={"metric": "f1"})
    with pytest.raises(ValueError, match="backbone_source is a declared backbone name's; 'tiny-random' is none"):
        RunConfig(backbone="tiny-random", backbone_source="tinybert-shape")


def test_the_committed_records_hold_neither_field():
    """Every committed record's config.json reads back without the new fields: none is added to what it says."""
    paths = sorted((REPO / "results").rglob("config.json"))
    assert len(paths) > 100
    for path in paths:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if "task" not in stored:
            continue  # a study's own config (a kl-original curve's design), no run config
        written = RunConfig.from_dict(stored).to_dict()
        assert not {"task_declaration", "backbone_source"} & set(written), path
        assert {k: written[k] for k in stored} == stored, path


# --- what is refused ---------------------------------------------------------------------------------------------

# (what the declaration changes: task fields, or a whole backbones table; the table's name; words of the message)
BAD_TASKS = [
    ({"label": "verdict"}, "reviews", "unknown field(s) ['label']; a table here takes ['description', 'train'"),
    ({"metric": None}, "reviews", "missing field(s) ['metric']"),
    ({"train": "nowhere.csv"}, "reviews", "train: no file"),
    ({"dev": ""}, "reviews", "dev: a non-empty string, got ''"),
    ({"format": "xlsx"}, "reviews", "format must be one of ['csv', 'tsv', 'jsonl'], got 'xlsx'"),
    ({"header": "yes"}, "reviews", "header: true (the first line names the columns) or false"),
    ({"format": "jsonl", "header": True}, "reviews", "header: a JSON-lines file has no header"),
    ({"text_columns": ["review", "review", "verdict"]}, "reviews", "text_columns: a list of one column"),
    ({"text_columns": "review"}, "reviews", "text_columns: a list of one column"),
    ({"text_columns": [0]}, "reviews", "text_columns: a column name, got 0"),
    ({"header": False}, "reviews", "text_columns must be an integer >= 0, got 'review'"),
    ({"label_column": "review"}, "reviews", "text_columns, label_column: ['review'] and 'review' name one column twice"),
    ({"text_columns": ["text"]}, "reviews", ("train: ", "has no column 'text'; its header is ['review', 'verdict']")),
    ({"labels": ["good"]}, "reviews", "labels: the label values as the files write them, at least two"),
    ({"labels": [0.5, 1.5]}, "reviews", "labels: the label values as the files write them"),
    ({"labels": [True, False]}, "reviews", "labels: the label values as the files write them"),
    ({"labels": ["bad", "good", "bad"]}, "reviews", "labels: ['bad', 'good', 'bad'] names a value twice"),
    ({"metric": "auc"}, "reviews", "metric must be one of ['accuracy', 'f1', 'mcc'], got 'auc'"),
    ({"labels": ["bad", "good", "meh"], "metric": "f1"}, "reviews", "metric: 'f1' is the F1 of the second label"),
    ({"description": ""}, "reviews", "description: a non-empty string"),
    ({}, "Reviews!", "the name 'Reviews!' names its record folders"),
    ({}, "mrpc", "'mrpc' is a built-in task's name; name yours otherwise"),
    ({}, "sst-2", "'sst-2' is a built-in task's name"),
]
BAD_BACKBONES = [
    ({"tiny-random": {"source": "tinybert-shape"}}, "tiny-random", "'tiny-random' is a built-in backbone's name"),
    ({"mine": {"source": "no such thing"}}, "mine", "source: 'no such thing' is no built-in backbone"),
    ({"mine": {"source": "./checkpoints/gone"}}, "mine", "no folder"),
    ({"mine": {"source": "empty_folder/gone"}}, "mine", ("source: 'empty_folder/gone' is no built-in backbone",
                                                         "empty_folder/gone is not there")),
    ({"mine": {"source": "empty_folder"}}, "mine", ("source: backbone folder", "holds no checkpoint: no config.json")),
    ({"mine": {"description": "what"}}, "mine", "missing field(s) ['source']"),
    ({"mine": {"source": "tiny-random", "path": "x"}}, "mine", "unknown field(s) ['path']"),
    ({"My/Bert": {"source": "tiny-random"}}, "My/Bert", "the name 'My/Bert' names its record folders"),
]


def as_tuple(words: str | tuple) -> tuple:
    return (words,) if isinstance(words, str) else words


def bad_task_case(change: dict, name: str) -> dict:
    table = {**TASK, **change}
    return {"tasks": {name: {k: v for k, v in table.items() if v is not None}}}


def _refused(tmp_path, monkeypatch, declaration: dict,
             argv=("run", "--task", "mrpc", "--backbone", "tiny-random")) -> Path:
    """The command's stderr; it must exit 2 in under 2 s and write nothing."""
    (tmp_path / "empty_folder").mkdir(exist_ok=True)
    write_reviews(tmp_path)
    profiles = write_profiles(tmp_path / "my_profiles.toml", **declaration)
    monkeypatch.setenv("TYPHOON_PROFILES", str(profiles))
    before = sorted(tmp_path.rglob("*"))
    start = time.perf_counter()
    code = main([*argv, "--profile", "smoke", "--out", str(tmp_path / "out")])
    seconds = time.perf_counter() - start
    assert code == 2 and seconds < 2, (code, seconds)
    assert sorted(tmp_path.rglob("*")) == before, "a refused command must write nothing"
    return profiles


@pytest.mark.parametrize("change, name, words", BAD_TASKS, ids=[f"{n}: {sorted(c) or 'name'}" for c, n, _ in BAD_TASKS])
def test_a_bad_task_declaration_is_refused_naming_the_file_table_and_field(change, name, words, tmp_path, monkeypatch, capsys):
    profiles = _refused(tmp_path, monkeypatch, bad_task_case(change, name))
    err = capsys.readouterr().err
    assert f"typhoon: error: {profiles}: [tasks.{name}]" in err and all(w in err for w in as_tuple(words)), err
    assert "Traceback" not in err


@pytest.mark.parametrize("tables, name, words", BAD_BACKBONES, ids=[n for _, n, _ in BAD_BACKBONES])
def test_a_bad_backbone_declaration_is_refused_naming_the_file_table_and_field(tables, name, words, tmp_path, monkeypatch, capsys):
    profiles = _refused(tmp_path, monkeypatch, {"backbones": tables})
    err = capsys.readouterr().err
    assert f"typhoon: error: {profiles}: [backbones.{name}]" in err and all(w in err for w in as_tuple(words)), err


def test_a_task_file_that_is_no_csv_or_json_lines_is_refused_as_declared(tmp_path, monkeypatch, capsys):
    (tmp_path / "rows.jsonl").write_text('["a list, not an object", 1]\n', encoding="utf-8")
    profiles = _refused(tmp_path, monkeypatch, {"tasks": {"rows": {**TASK, "train": "rows.jsonl", "dev": "rows.jsonl",
                                                      "text_columns": ["text"], "label_column": "y"}}})
    err = capsys.readouterr().err
    assert f"{profiles}: [tasks.rows] train: " in err and "is no jsonl file (line 1: not a JSON object but list)" in err
    (tmp_path / "rows.txt").write_text("a,b\n", encoding="utf-8")
    _refused(tmp_path, monkeypatch, {"tasks": {"rows": {**TASK, "train": "rows.txt", "dev": "rows.txt"}}})
    assert "[tasks.rows] format: not given, and the files' suffixes do not say it" in capsys.readouterr().err


def test_a_name_two_files_declare_is_refused_naming_both(tmp_path, monkeypatch, capsys):
    write_reviews(tmp_path)
    first = write_profiles(tmp_path / "a.toml", {"reviews": TASK})
    second = write_profiles(tmp_path / "b.toml", {"reviews": TASK})
    monkeypatch.setenv("TYPHOON_PROFILES", os.pathsep.join(map(str, (first, second))))
    assert main(["run", "--task", "reviews", "--out", str(tmp_path / "out")]) == 2
    assert f"[tasks.reviews] is declared in {first} and in {second}; keep one" in capsys.readouterr().err


def test_a_profile_named_tasks_is_refused(tmp_path, monkeypatch, capsys):
    path = tmp_path / "p.toml"
    path.write_text('[tasks]\ndescription = "an old profile"\ntasks = ["mrpc"]\n', encoding="utf-8")
    monkeypatch.setenv("TYPHOON_PROFILES", str(path))
    assert main(["profiles"]) == 2
    assert "tasks.description is no table; declare each of your tasks as [tasks.<name>] (a profile may not be " \
           "named 'tasks')" in capsys.readouterr().err


def test_what_a_declaration_decides_cannot_be_set(declared, tmp_path, capsys):
    for item in ('task_declaration={"metric": "f1"}', "backbone_source=tinybert-shape"):
        assert main(["run", "--task", "reviews", "--backbone", "my-tiny", "--profile", "smoke", "--set", item,
                     "--out", str(tmp_path / "out")]) == 2
        key = item.partition("=")[0]
        assert f"the overrides set {key!r}: " in capsys.readouterr().err
    assert main(["data", "fetch", "reviews"]) == 2
    assert "task reviews is your own (declared in" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_unknown_task_names_the_declared_ones(declared, capsys):
    assert main(["run", "--task", "review", "--out", "x"]) == 2
    assert "unknown GLUE task 'review'; choose one of ['cola', " in (err := capsys.readouterr().err)
    assert "or one of yours ['reviews']" in err


@pytest.mark.slow  # a fresh interpreter: nothing before it has imported torch
def test_a_bad_declaration_is_refused_without_importing_torch(tmp_path):
    write_reviews(tmp_path)
    profiles = write_profiles(tmp_path / "p.toml", {"reviews": {**TASK, "metric": "auc"}})
    script = ("import json, sys, time\nfrom typhoon.cli import main\nstart = time.perf_counter()\n"
              "code = main(sys.argv[1:])\nprint(json.dumps({'code': code, 'seconds': time.perf_counter() - start, "
              "'heavy': sorted({'torch', 'transformers', 'datasets'} & set(sys.modules))}))")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TYPHOON_PROFILES": str(profiles)}
    done = subprocess.run([sys.executable, "-c", script, "run", "--task", "reviews", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (seen["code"], seen["heavy"]) == (2, []) and seen["seconds"] < 1.0, (seen, done.stderr)
    assert "[tasks.reviews] metric must be one of" in done.stderr
