"""Importing or loading anything of the bundle leaves transformers' verbosity and progress bars, and the datasets
and hub bars, as the user had them (only the bundle's own command line, workers and notebooks quiet them, for
themselves: typhoon.progress_bars.disable_library_bars)."""

from __future__ import annotations

import subprocess
import sys

import pytest

LIBRARY_STATE = """
import datasets, huggingface_hub.utils as hub
from transformers.utils import logging
def library_state():
    return {"transformers verbosity": logging.get_verbosity(),
            "transformers bars": logging.is_progress_bar_enabled(),
            "datasets bars": datasets.is_progress_bar_enabled(),
            "hub bars": not hub.are_progress_bars_disabled()}
"""


def library_state():
    namespace = {}
    exec(LIBRARY_STATE, namespace)
    return namespace["library_state"]()


def test_loading_a_backbone_changes_no_library_setting():
    """load_backbone and both models built from it (their loading is quieted while it runs) leave transformers'
    settings as they were, a user's own (info, bars on) included."""
    from transformers.utils import logging

    from typhoon.models import load_backbone

    before = logging.get_verbosity()
    try:
        logging.set_verbosity_info()
        logging.enable_progress_bar()
        wanted = library_state()
        backbone = load_backbone("tiny-random")
        backbone.mlm_model(seed=1)
        backbone.classifier(num_labels=2, seed=1)
        assert library_state() == wanted
    finally:
        logging.set_verbosity(before)


@pytest.mark.slow
def test_importing_every_module_changes_no_library_setting():
    """In a fresh process: every module of the package imported (the faces' names loaded too), a backbone loaded
    and a typhoon.hf collator made, then the libraries' settings are their defaults still."""
    from conftest import REPO

    code = LIBRARY_STATE + f"""
import importlib, pkgutil, sys
sys.path.insert(0, {str(REPO)!r})
before = library_state()
import typhoon
skipped = ("typhoon.__main__",)  # runs the command line
for module in pkgutil.walk_packages(typhoon.__path__, "typhoon."):
    if module.name not in skipped:
        importlib.import_module(module.name)
from typhoon.models import load_backbone
from typhoon.hf import masking_collator
backbone = load_backbone("tiny-random")
backbone.mlm_model(seed=0)
masking_collator(backbone.tokenizer, "whole_word")
after = library_state()
print(before == after, before, after)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    same, _, detail = done.stdout.strip().partition(" ")
    assert same == "True", detail
    assert "'transformers verbosity': 30" in detail and "'transformers bars': True" in detail
