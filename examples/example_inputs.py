"""What both examples (hf_trainer_typhoon.py, loop_typhoon.py) take: a model, training texts, a strategy with its
budget, where to write; read from the same command-line flags."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from typhoon.hf import strategy_names


def add_arguments(parser: argparse.ArgumentParser, output_name: str) -> None:
    """The flags both examples share; ``--output-dir`` defaults to ~/.cache/typhoon/<output_name> (or under
    $XDG_CACHE_HOME): outside the repository, kept between runs (``--resume``)."""
    parser.add_argument("--model", default="minilm-l6-mlm")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--train-file")
    source.add_argument("--task", default="mrpc")
    parser.add_argument("--strategy", default="typhoon", help=f"one of {strategy_names()}")
    parser.add_argument("--mlm-probability", "--p", dest="p", type=float, default=0.15,
                        help="the masking budget (the bundle calls it p)")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--max-train-examples", type=int)
    parser.add_argument("--seed", type=int, default=0)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    parser.add_argument("--output-dir", default=str(Path(cache) / "typhoon" / output_name), help="default: %(default)s")
    parser.add_argument("--resume", action="store_true", help="go on from the last checkpoint in --output-dir")


def load_model(name: str):
    """(model, tokenizer): a bundle backbone by its short name, else any AutoModelForMaskedLM checkpoint."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from typhoon.names import BACKBONES

    if name.lower() in BACKBONES:
        from typhoon.models import load_backbone

        backbone = load_backbone(name)
        return backbone.mlm_model(seed=0).model, backbone.tokenizer
    return AutoModelForMaskedLM.from_pretrained(name), AutoTokenizer.from_pretrained(name, use_fast=True)


def load_texts(args) -> list[str]:
    """The training texts: the lines of ``--train-file``, or every sentence of a GLUE task's training split (a pair
    task's two sentences, each a text), the first ``--max-train-examples``."""
    if args.train_file:
        with open(args.train_file, encoding="utf-8") as fh:
            texts = [line.strip() for line in fh if line.strip()]
    else:
        from typhoon.data import get_task, load_glue

        train = load_glue(args.task)["train"]
        texts = [text for column in get_task(args.task).normalized_text_columns for text in train[column]]
    return texts[:args.max_train_examples]
