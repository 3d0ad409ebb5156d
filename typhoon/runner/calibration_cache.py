"""The estimate's calibration, kept per machine, profile and code version, so that a restarted ``reproduce``
starts training within seconds instead of calibrating again (a minute or three on a 2-core CPU).

A calibration (:func:`typhoon.runner.estimate.run_calibration`) prices each cell from a few real steps timed on
this machine. What it measured holds while nothing that decides the timings changed (:func:`timing_key`): the
machine (CPU model, features, cores, GPUs), the code (the git commit of the checkout the package runs from and a
hash of the package's sources, so an edit not yet committed counts too), the torch and Python it runs on, the
profile and its cells' settings (each cell's resolved configuration), and the worker and thread counts (and the
number of calibration processes). It is kept for :data:`MAX_AGE_S` (the machine's load drifts), in
:func:`cache_dir`, one JSON file per key, written atomically. A cached calibration is used only when it priced
every cell still to run, with the same configuration; otherwise the estimate calibrates again and replaces it.
A resumed grid first reuses its own estimate, kept in its folder's manifest (:mod:`typhoon.runner.estimate`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from typhoon import machine
from typhoon.config import RunConfig
from typhoon.training import code_version

MAX_AGE_S = 6 * 3600.0  # a calibration older than this is measured again: the machine's load moves


def cache_dir() -> Path:
    """``$TYPHOON_CACHE_DIR/calibration``; by default under ``$XDG_CACHE_HOME/typhoon`` (``~/.cache/typhoon``)."""
    root = os.environ.get("TYPHOON_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "typhoon"
    return Path(root) / "calibration"


@functools.cache  # the machine does not change under a running process (read-only: the key is only serialised)
def machine_key() -> dict:
    """What of the machine the step times depend on: the CPU, its features and cores, the GPUs."""
    cpu = machine.cpu_features()
    return {"cpu": cpu.model, "features": [f for f in machine.CPU_FLAGS if getattr(cpu, f)],
            "cores": machine.usable_cores(), "gpus": machine.gpu_devices()}


def software_key() -> dict:
    """The code and the software it runs on: the checkout's commit (None outside git), the package's code hash,
    the torch and Python versions."""
    import platform
    from importlib import metadata

    from typhoon.records import git_state

    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = None
    return {"commit": git_state().get("commit"), "code": code_version(), "torch": torch,
            "python": platform.python_version()}


def timing_key(profile: str, threads: int | None, workers: int) -> dict:
    """What decides a grid's timings here, but for its cells' settings (checked cell by cell): the machine, the code
    and its software, the profile, the worker and thread counts."""
    return {"profile": profile, "threads": threads, "workers": workers, **software_key(), "machine": machine_key()}


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class CachedCalibration:
    results: list[dict]  # run_calibration's results, one per calibration process
    calibration_s: float  # how long measuring them took
    age_s: float  # how long ago
    commit: str | None = None  # the commit of the code it was made with


def _key(profile: str, threads: int | None, processes: int, workers: int | None = None) -> tuple[str, dict]:
    key = {**timing_key(profile, threads, processes if workers is None else workers), "processes": processes}
    return key_digest(key), key


def _cells(configs: list[RunConfig]) -> dict[str, dict]:
    return {c.relative_dir().as_posix(): c.to_dict() for c in configs}


def load(profile: str, configs: list[RunConfig], threads: int | None, processes: int,
         now: float | None = None, workers: int | None = None) -> CachedCalibration | None:
    """The kept calibration that priced every one of ``configs`` with the same configuration, on this machine
    with this code and software, workers, threads and processes, younger than :data:`MAX_AGE_S`; None otherwise."""
    name, _ = _key(profile, threads, processes, workers)
    path = cache_dir() / f"{name}.json"
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    age = (time.time() if now is None else now) - float(entry.get("made_at", 0))
    priced = entry.get("cells", {})
    if not 0 <= age < MAX_AGE_S or any(priced.get(p) != c for p, c in _cells(configs).items()):
        return None
    return CachedCalibration(entry["results"], float(entry["calibration_s"]), age, entry.get("commit"))


def save(profile: str, configs: list[RunConfig], threads: int | None, processes: int, results: list[dict],
         calibration_s: float, workers: int | None = None) -> Path | None:
    """Keep a calibration for :func:`load`; a cache that cannot be written is skipped (the estimate stands)."""
    from typhoon.atomic import atomic_write_json

    name, key = _key(profile, threads, processes, workers)
    path = cache_dir() / f"{name}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {**key, "made_at": time.time(), "calibration_s": calibration_s,
                                 "cells": _cells(configs), "results": results})
    except OSError:
        return None
    return path


def last_duration(profile: str, threads: int | None, processes: int) -> float | None:
    """How long the last calibration of this profile took on this machine (any code version, any age):
    what the announcement of a new one says to expect; None when it never ran here."""
    _, key = _key(profile, threads, processes)
    durations = []
    for path in cache_dir().glob("*.json"):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (entry.get("profile"), entry.get("threads"), entry.get("processes"), entry.get("machine")) == \
                (profile, threads, processes, key["machine"]):
            durations.append((float(entry.get("made_at", 0)), float(entry.get("calibration_s", 0))))
    return max(durations)[1] if durations else None
