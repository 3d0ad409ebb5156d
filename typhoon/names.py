"""The names the command line accepts for a task and a backbone, known without importing torch.

``typhoon.data.glue_files`` (GLUE_TASKS) and ``typhoon.models.backbones`` (BACKBONES) import torch and transformers, seconds
of start-up; a mistyped name should be refused at once. These lists repeat their keys, and
tests/test_cli.py checks that they agree, so a task or backbone added there must be added here.
"""

from __future__ import annotations

from pathlib import Path

GLUE_TASK_NAMES = ("cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "wnli")
TASK_ALIASES = {"sst-2": "sst2", "mnli-m": "mnli", "mnli_matched": "mnli"}
BACKBONE_NAMES = ("bert-base", "bert-base-shape", "deberta-v3-base", "distilbert", "distilbert-shape",
                  "electra-base-generator", "minilm-l6", "minilm-l6-mlm", "modernbert-base", "roberta-base",
                  "tiny-random", "tinybert", "tinybert-shape")
# What the MLM phase starts from, per backbone: a reader of a report must know whether the saliency came through a
# model that predicts masked words. Every other backbone brings its pretrained MLM head.
MLM_HEAD = {"minilm-l6": "MiniLM-L6 (a sentence-embedding model) with no MLM head: each run trains a fresh one",
            "minilm-l6-mlm": "MiniLM-L6 with its encoder and MLM head adapted on English prose (shipped, hash-checked)",
            "tiny-random": "random weights: a pipeline check",
            **{name: f"random weights of {paper}'s shape: a speed check" for name, paper in
               (("tinybert-shape", "TinyBERT 4L-312D"), ("distilbert-shape", "DistilBERT-base"),
                ("bert-base-shape", "BERT-base"))}}
PRETRAINED_MLM_HEAD = "its pretrained MLM head"


def canonical_task(task: str) -> str:
    """The registry's name of ``task`` (any case, an alias); ValueError naming it and the choices when it
    is no GLUE task (as ``data.get_task`` would)."""
    key = str(task).strip().lower()
    key = TASK_ALIASES.get(key, key)
    if key not in GLUE_TASK_NAMES:
        raise ValueError(f"unknown GLUE task {task!r}; choose one of {sorted(GLUE_TASK_NAMES)}")
    return key


def check_task(task: str) -> None:
    """ValueError naming ``task`` and the choices when it is no GLUE task."""
    canonical_task(task)


def check_backbone(name: str) -> None:
    """ValueError / FileNotFoundError for a backbone that is neither a registry name, a hub id ("org/name")
    nor a local folder -- what ``models.load_backbone`` refuses first, before it imports anything."""
    key = str(name).strip()
    local = Path(key).expanduser()
    if key.lower() in BACKBONE_NAMES:
        return
    if local.is_dir():
        check_checkpoint_folder(local)
        return
    if local.is_absolute() or key.startswith((".", "~")):
        raise FileNotFoundError(f"backbone folder not found: {local}")
    if "/" not in key:
        raise ValueError(f"unknown backbone {name!r}; choose one of {sorted(BACKBONE_NAMES)}, a local folder or a hub id")


# the weights a checkpoint folder may hold (transformers' save_pretrained: one file, or shards and their index)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def check_checkpoint_folder(folder: Path) -> None:
    """FileNotFoundError unless a local backbone folder holds a checkpoint: its ``config.json`` and its weights
    (said here in a fraction of a second, not by transformers after the imports)."""
    missing = [what for what, present in (("config.json", (folder / "config.json").is_file()),
                                          (" or ".join(WEIGHT_FILES), any((folder / f).is_file() for f in WEIGHT_FILES)))
               if not present]
    if missing:
        raise FileNotFoundError(f"backbone folder {folder} holds no checkpoint: no {' and no '.join(missing)} "
                                "(a folder saved by transformers' save_pretrained, with its tokenizer)")
