"""The setup report (``notebooks/00_setup``): what this machine will run with, where the data and each
backbone come from, before any training.

Each function returns a tidy table. Nothing here decides anything: the device, precision and kernels
are what a run resolves ``auto`` to (:func:`typhoon.training.device_settings.resolve_settings`), the cores what :mod:`typhoon.studies.grid.policy` shares out,
the data what :func:`typhoon.data.glue_files.load_glue` reads, the backbones :data:`typhoon.names.BACKBONES`.
"""

from __future__ import annotations

import os
import platform
from collections import Counter
from collections.abc import Sequence

import pandas as pd
import torch

from typhoon import machine
from typhoon.config import RunConfig
from typhoon.data import get_task, load_glue, locate_glue
from typhoon.models import ADAPTED, BACKBONES, minilm_dir
from typhoon.paths import GLUE_DIR_ENV
from typhoon.training import git_commit, library_versions, resolve_settings

__all__ = ["backbone_report", "backbone_source", "data_report", "environment_report", "glue_source"]


def environment_report() -> pd.DataFrame:
    """Library versions, device, bf16 support, attention and dropout kernels, threads, as a table (item, value)."""
    settings = resolve_settings(RunConfig(device="auto", precision="auto", attention="auto", dropout="auto"))
    device = settings.device
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    items = {
        **library_versions(),
        "platform": platform.platform(),
        "git commit": git_commit() or "unknown",
        "device": f"{device.type} ({device_name})",
        "cuda available": torch.cuda.is_available(),
        "precision (precision=auto)": f"{settings.precision.name} ({settings.precision.reason})",
        "attention kernel (attention=auto)": settings.attention,
        "dropout kernel (dropout=auto)": settings.dropout,
        "cpu cores (usable)": machine.usable_cores(),
        "torch threads": settings.threads,
        "torch interop threads": torch.get_num_interop_threads(),
    }
    for var in ("OMP_NUM_THREADS", GLUE_DIR_ENV, "HF_HUB_OFFLINE", "HF_HOME"):
        items[f"${var}"] = os.environ.get(var, "(unset)")
    return pd.DataFrame({"item": list(items), "value": [str(v) for v in items.values()]})


def glue_source(task: str, data_dir: str | os.PathLike | None = None) -> str:
    """Where :func:`typhoon.data.glue_files.load_glue` reads ``task`` from: a local folder (and which) or the hub."""
    return str(locate_glue(task, data_dir))


def data_report(tasks: Sequence[str], data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per (task, split): source, size, label counts and the majority-class share."""
    rows = []
    for task in tasks:
        spec = get_task(task)
        source = glue_source(task, data_dir)
        for split, ds in load_glue(task, data_dir).items():
            counts = Counter(ds["label"])
            labelled = -1 not in counts
            n = len(ds)
            balance = ", ".join(f"{name} {counts.get(i, 0)} ({counts.get(i, 0) / n:.1%})"
                                for i, name in enumerate(spec.label_names)) if labelled else "unlabelled"
            rows.append({"task": spec.name, "split": split, "examples": n, "metric": spec.metric,
                         "labels": balance,
                         "majority_share": max(counts.values()) / n if labelled else float("nan"),
                         "source": source})
    return pd.DataFrame(rows)


def backbone_source(name: str) -> str:
    """Where a registered backbone comes from: a local package folder, built in memory, or a hub id."""
    spec = BACKBONES[name]
    if spec.source is None:
        return f"built in memory (vocabulary of {minilm_dir()})"
    if spec.source == "<minilm>":
        return str(minilm_dir()) + (f" + {ADAPTED[name].weights}" if name in ADAPTED else "")
    return f"hub: {spec.source}"


def _hub_cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def backbone_report() -> pd.DataFrame:
    """Every backbone of ``typhoon.names.BACKBONES``: source, whether it loads offline, and if it is available now.

    Nothing is loaded: a local folder must exist, a hub backbone must be in the Hugging Face cache
    (or the hub reachable when the run starts).
    """
    rows = []
    for name, spec in BACKBONES.items():
        if spec.source is None or spec.source == "<minilm>":
            available = minilm_dir().is_dir() and (name not in ADAPTED or ADAPTED[name].weights.is_file())
        else:
            available = _hub_cached(spec.source)
        rows.append({"backbone": name, "offline": spec.offline, "available_now": available,
                     "source": backbone_source(name), "description": spec.description})
    return pd.DataFrame(rows)
