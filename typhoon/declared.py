"""The tasks and backbones a user declares in a profiles file of their own, read and checked as they are read.

A profiles file named in ``$TYPHOON_PROFILES`` (docs/extending.md) may hold, beside its profiles,

    [tasks.<name>]       a classification task of your own: its train and dev files (CSV, TSV or JSON lines),
                         its text column(s), its label column and label values, and its metric;
    [backbones.<name>]   a short name for a backbone: a built-in one, a local checkpoint folder or a hub id.

Each table is checked when its file is read, torch-free: a bad field is refused naming the file, the table and
the field, with what the field allows; a task's files must be there, and the first record of each must hold its
columns. Paths are read from the profiles file's folder. :mod:`typhoon.names` adds the declared names to the
built-in ones (a built-in name is refused here) and the run config takes a declared task's
:meth:`UserTask.declaration` into its identity; :mod:`typhoon.data.task_files` reads a declared task's rows.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import re
import tomllib
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from typhoon.allowed import check_choice, check_int_at_least
from typhoon.paths import file_sha256

# More profiles files, beside the package's (os.pathsep between them): a study, a task or a backbone name of your
# own (docs/extending.md). The notebook kernels and the workers inherit it, so they see the same declarations.
PROFILES_ENV = "TYPHOON_PROFILES"
DECLARATION_TABLES = ("tasks", "backbones")  # top-level tables of a profiles file that are no profile

TASK_FORMATS = ("csv", "tsv", "jsonl")
TASK_METRICS = ("accuracy", "f1", "mcc")  # typhoon/data/glue_metric.py; f1 is the F1 of the second label
SPLIT_FILES = ("train", "dev")
TASK_FIELDS = ("description", *SPLIT_FILES, "format", "header", "text_columns", "label_column", "labels", "metric")
REQUIRED_TASK_FIELDS = (*SPLIT_FILES, "text_columns", "label_column", "labels", "metric")
BACKBONE_FIELDS = ("source", "description")
# a record folder's name on every file system (runs/<task>/<backbone>/...)
TASK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
BACKBONE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# TSV as the GLUE files are: split on tabs, no quoting (a bare " is text); CSV with the usual quoting
DIALECTS = {"csv": {}, "tsv": {"delimiter": "\t", "quoting": csv.QUOTE_NONE}}
# the weights a checkpoint folder may hold (transformers' save_pretrained: one file, or shards and their index)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


class TaskColumns:
    """What the data stage asks of a task, built-in or declared: its text columns and its labels."""

    text_columns: tuple
    label_names: tuple[str, ...]

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def normalized_text_columns(self) -> tuple[str, ...]:
        return ("sentence1", "sentence2") if self.is_pair else ("sentence",)


@dataclass(frozen=True)
class UserTask(TaskColumns):
    """A classification task declared in a profiles file (``[tasks.<name>]``)."""

    name: str
    declared_in: Path  # the profiles file
    files: Mapping[str, Path]  # by split: "train", "dev"
    format: str  # csv | tsv | jsonl
    header: bool  # csv, tsv: the first line names the columns; else they are numbered from 0 (jsonl: True)
    text_columns: tuple[str | int, ...]  # one (a sentence) or two (a pair)
    label_column: str | int
    label_names: tuple[str, ...]  # the label values as the file writes them, numbered 0, 1, ... in this order
    metric: str  # accuracy | f1 | mcc
    description: str = ""

    def declaration(self, sha256: Mapping[str, str] | None = None) -> dict:
        """What decides a run of this task, as its run config holds it (``RunConfig.task_declaration``): how the
        files are read, the labels and the metric, and each file's sha256 (``sha256``: those of the bytes a
        reader read; default the files' now). Not the paths or the description: the same files moved elsewhere
        are the same task, a changed file is another."""
        return {"format": self.format, **({} if self.format == "jsonl" else {"header": self.header}),
                "text_columns": list(self.text_columns), "label_column": self.label_column,
                "labels": list(self.label_names), "metric": self.metric,
                "sha256": dict(sha256) if sha256 is not None else
                {split: current_sha256(path) for split, path in self.files.items()}}


@dataclass(frozen=True)
class UserBackbone:
    """A backbone's short name declared in a profiles file (``[backbones.<name>]``)."""

    name: str
    declared_in: Path
    source: str  # a built-in backbone's name, a local checkpoint folder (absolute) or a hub id
    description: str = ""


@functools.lru_cache(maxsize=256)
def _sha256_of_version(path: Path, size: int, mtime_ns: int) -> str:
    return file_sha256(path)


def current_sha256(path: Path) -> str:
    """A declared task file's sha256, computed once per version of the file (its size and modification time):
    every run config of a grid names it."""
    stat = Path(path).stat()
    return _sha256_of_version(Path(path), stat.st_size, stat.st_mtime_ns)


def records(lines: Iterable[str], format: str) -> Iterator[tuple[int, list[str] | dict]]:
    """Each record of a task file's ``lines`` (a file opened with ``newline=""``) with the line it starts on: a
    list of fields (csv, tsv) or an object (jsonl). Blank lines are no record. ValueError for a JSON line that is
    no object."""
    if format == "jsonl":
        for line_no, line in enumerate(lines, 1):
            if line.strip():
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"line {line_no}: not JSON ({err.msg})") from None
                if not isinstance(value, dict):
                    raise ValueError(f"line {line_no}: not a JSON object but {type(value).__name__}")
                yield line_no, value
        return
    reader = csv.reader(lines, **DIALECTS[format])
    start = 1
    for fields in reader:
        if fields:
            yield start, fields
        start = reader.line_num + 1


def profiles_files(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """The profiles files ``$TYPHOON_PROFILES`` names, in order; ValueError for one that is not there."""
    files = [Path(entry) for entry in filter(None, environ.get(PROFILES_ENV, "").split(os.pathsep))]
    for path in files:
        if not path.is_file():
            raise ValueError(f"${PROFILES_ENV}: no profiles file {path}")
    return files


def check_checkpoint_folder(folder: Path) -> None:
    """FileNotFoundError unless a local backbone folder holds a checkpoint: its ``config.json`` and its weights
    (said here in a fraction of a second, not by transformers after the imports)."""
    missing = [what for what, present in (("config.json", (folder / "config.json").is_file()),
                                          (" or ".join(WEIGHT_FILES), any((folder / f).is_file() for f in WEIGHT_FILES)))
               if not present]
    if missing:
        raise FileNotFoundError(f"backbone folder {folder} holds no checkpoint: no {' and no '.join(missing)} "
                                "(a folder saved by transformers' save_pretrained, with its tokenizer)")


def read_declarations(path: Path, builtin_tasks: Collection[str], builtin_backbones: Collection[str]
                      ) -> tuple[dict[str, UserTask], dict[str, UserBackbone]]:
    """The tasks and backbones ``path`` declares, each checked; ValueError naming the file, the table and the
    field for a bad one, or a name of ``builtin_tasks`` / ``builtin_backbones``. Read once per version of the
    file."""
    stat = Path(path).stat()
    return _read(Path(path).resolve(), stat.st_size, stat.st_mtime_ns, frozenset(builtin_tasks),
                 frozenset(builtin_backbones))


@functools.lru_cache(maxsize=32)
def _read(path: Path, size: int, mtime_ns: int, builtin_tasks: frozenset, builtin_backbones: frozenset):
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:  # its message ends "(at line L, column C)"
        raise ValueError(f"{path}: not valid TOML: {err}") from None
    tasks = {name: _task(name, table, path, f"{path}: [tasks.{name}]")
             for name, table in _tables(raw, "tasks", path, builtin_tasks).items()}
    backbones = {name: _backbone(name, table, path, f"{path}: [backbones.{name}]", builtin_backbones)
                 for name, table in _tables(raw, "backbones", path, builtin_backbones).items()}
    return tasks, backbones


def _tables(raw: Mapping, kind: str, path: Path, builtins: frozenset) -> dict[str, Mapping]:
    """The ``[<kind>.<name>]`` tables of a profiles file; ValueError for one that is no table or a built-in's name."""
    tables = raw.get(kind, {})
    if not isinstance(tables, dict):
        raise ValueError(f"{path}: {kind} = ... is no table; declare each as [{kind}.<name>]")
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ValueError(f"{path}: {kind}.{name} is no table; declare each of your {kind} as [{kind}.<name>] "
                             f"(a profile may not be named {kind!r})")
        if name in builtins:
            raise ValueError(f"{path}: [{kind}.{name}]: {name!r} is a built-in {kind[:-1]}'s name; name yours otherwise")
    return tables


def _unknown_fields(table: Mapping, allowed: tuple[str, ...], required: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}; a table here takes {list(allowed)}")
    missing = [key for key in required if key not in table]
    if missing:
        raise ValueError(f"{where}: missing field(s) {missing} (it needs {list(required)})")


def _string(table: Mapping, key: str, where: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} {key}: a non-empty string, got {value!r}")
    return value


def _task(name: str, table: Mapping, path: Path, where: str) -> UserTask:
    if not TASK_NAME.match(name):
        raise ValueError(f"{where}: the name {name!r} names its record folders (runs/<task>/...): lower-case "
                         "letters, digits, '_' and '-', starting with a letter or digit")
    _unknown_fields(table, TASK_FIELDS, REQUIRED_TASK_FIELDS, where)
    files = {}
    for split in SPLIT_FILES:
        given = Path(_string(table, split, where)).expanduser()
        files[split] = given if given.is_absolute() else path.parent / given
        if not files[split].is_file():
            raise ValueError(f"{where} {split}: no file {files[split]} (a path is read from the folder of {path.name})")
    suffixes = {p.suffix.lower().lstrip(".") for p in files.values()}
    default_format = suffixes.pop() if len(suffixes) == 1 and suffixes <= set(TASK_FORMATS) else None
    if "format" not in table and default_format is None:
        raise ValueError(f"{where} format: not given, and the files' suffixes do not say it; "
                         f"give format = one of {list(TASK_FORMATS)}")
    format = check_choice(f"{where} format", table.get("format", default_format), TASK_FORMATS)
    if format == "jsonl" and "header" in table:
        raise ValueError(f"{where} header: a JSON-lines file has no header (its objects' keys name the columns)")
    header = table.get("header", True)
    if not isinstance(header, bool):
        raise ValueError(f"{where} header: true (the first line names the columns) or false (they are numbered "
                         f"from 0), got {header!r}")
    text_columns, label_column = _columns(table, where, by_index=not header)
    labels = table["labels"]
    if (not isinstance(labels, list) or len(labels) < 2
            or any(isinstance(v, bool) or not isinstance(v, str | int) for v in labels)):
        raise ValueError(f"{where} labels: the label values as the files write them, at least two, each a string "
                         f"or an integer, in the order they are numbered (0, 1, ...); got {labels!r}")
    label_names = tuple(str(v) for v in labels)
    if len(set(label_names)) < len(label_names):
        raise ValueError(f"{where} labels: {labels!r} names a value twice")
    metric = check_choice(f"{where} metric", table["metric"], TASK_METRICS)
    if metric == "f1" and len(label_names) != 2:
        raise ValueError(f"{where} metric: 'f1' is the F1 of the second label, for two labels; these are "
                         f"{len(label_names)}: choose accuracy or mcc")
    task = UserTask(name, path, files, format, header, text_columns, label_column, label_names, metric,
                    _string(table, "description", where, default=name))
    for split, file in files.items():
        _check_first_record(task, file, f"{where} {split}")
    return task


def _columns(table: Mapping, where: str, by_index: bool) -> tuple[tuple, str | int]:
    """The text columns and the label column: names, or 0-based numbers in a file without a header."""
    what = "a column number (an integer >= 0: the file has no header)" if by_index else "a column name"

    def column(value, key):
        if by_index:
            return check_int_at_least(f"{where} {key}", value, 0)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{where} {key}: {what}, got {value!r}")
        return value

    text = table["text_columns"]
    if not isinstance(text, list) or len(text) not in (1, 2):
        raise ValueError(f"{where} text_columns: a list of one column (a sentence) or two (a pair), each {what}; "
                         f"got {text!r}")
    text = tuple(column(value, "text_columns") for value in text)
    label = column(table["label_column"], "label_column")
    if len(set(text)) < len(text) or label in text:
        raise ValueError(f"{where} text_columns, label_column: {list(text)} and {label!r} name one column twice")
    return text, label


def _check_first_record(task: UserTask, path: Path, where: str) -> None:
    """Refuse a file whose first record lacks a column the task names (its header, its field count, its keys)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            first = next(records(fh, task.format), None)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{where}: {path} is no {task.format} file ({err})") from None
    if first is None:
        raise ValueError(f"{where}: {path} holds no record")
    _, record = first
    columns = [*task.text_columns, task.label_column]
    if task.format == "jsonl":
        lacking = [c for c in columns if c not in record]
        have = f"its first object's keys are {sorted(record)}"
    elif task.header:
        lacking = [c for c in columns if c not in record]
        have = f"its header is {record}"
    else:
        lacking = [c for c in columns if c >= len(record)]
        have = f"its first line has {len(record)} columns (numbered from 0)"
    if lacking:
        raise ValueError(f"{where}: {path} has no column {lacking[0]!r}; {have}")


def _backbone(name: str, table: Mapping, path: Path, where: str, builtins: Collection[str]) -> UserBackbone:
    """The declared backbone, its source made what loads it: a built-in backbone's name as it is, a local folder
    absolute (read from the profiles file's folder; it must hold a checkpoint), a hub id as it is."""
    if not BACKBONE_NAME.match(name):
        raise ValueError(f"{where}: the name {name!r} names its record folders (runs/<task>/<backbone>/...): "
                         "lower-case letters, digits, '_', '-' and '.', starting with a letter or digit")
    _unknown_fields(table, BACKBONE_FIELDS, ("source",), where)
    given, description = _string(table, "source", where).strip(), _string(table, "description", where, default=name)
    local = Path(given).expanduser()
    local = local if local.is_absolute() else path.parent / local
    if given.lower() in builtins:
        source = given.lower()
    elif local.is_dir():
        try:
            check_checkpoint_folder(local)
        except FileNotFoundError as err:
            raise ValueError(f"{where} source: {err}") from None
        source = str(local)
    elif given.startswith((".", "~")) or not HUB_ID.match(given) or (path.parent / given.split("/")[0]).is_dir():
        # an "org/name" whose "org" is a folder beside the profiles file means a folder there, not a hub id
        raise ValueError(f"{where} source: {given!r} is no built-in backbone ({sorted(builtins)}), no folder "
                         f"({local} is not there) and no hub id (org/name)")
    else:
        source = given
    return UserBackbone(name, path, source, description)
