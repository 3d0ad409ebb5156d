"""The estimate's calibration, kept per machine, profile and code version, so that a restarted ``reproduce``
starts training within seconds instead of calibrating again (a minute or three on a 2-core CPU).

A calibration (:func:`typhoon.runner.estimate.run_calibration`) prices each cell from a few real steps timed on
this machine. What it measured holds while nothing it depends on changed: the machine (CPU model, features,
cores, GPUs), the profile, the package's code (a hash of its sources), the thread count and the number of
calibration processes, and each cell's resolved configuration. It is kept for :data:`MAX_AGE_S` (the
machine's load drifts), in :func:`cache_dir`, one JSON file per
key, written atomically. A cached calibration is used only when it priced every cell still to run, with the
same configuration; otherwise the estimate calibrates again and replaces it.
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


@dataclass(frozen=True)
class CachedCalibration:
    results: list[dict]  # run_calibration's results, one per calibration process
    calibration_s: float  # how long measuring them took
    age_s: float  # how long ago


def _key(profile: str, threads: int | None, processes: int) -> tuple[str, dict]:
    key = {"profile": profile, "threads": threads, "processes": processes, "code": code_version(),
           "machine": machine_key()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20], key


def _cells(configs: list[RunConfig]) -> dict[str, dict]:
    return {c.relative_dir().as_posix(): c.to_dict() for c in configs}


def load(profile: str, configs: list[RunConfig], threads: int | None, processes: int,
         now: float | None = None) -> CachedCalibration | None:
    """The kept calibration that priced every one of ``configs`` with the same configuration, on this machine
    with this code, threads and processes, younger than :data:`MAX_AGE_S`; None otherwise."""
    name, _ = _key(profile, threads, processes)
    path = cache_dir() / f"{name}.json"
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    age = (time.time() if now is None else now) - float(entry.get("made_at", 0))
    priced = entry.get("cells", {})
    if not 0 <= age < MAX_AGE_S or any(priced.get(p) != c for p, c in _cells(configs).items()):
        return None
    return CachedCalibration(entry["results"], float(entry["calibration_s"]), age)


def save(profile: str, configs: list[RunConfig], threads: int | None, processes: int, results: list[dict],
         calibration_s: float) -> Path | None:
    """Keep a calibration for :func:`load`; a cache that cannot be written is skipped (the estimate stands)."""
    from typhoon.atomic import atomic_write_json

    name, key = _key(profile, threads, processes)
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
