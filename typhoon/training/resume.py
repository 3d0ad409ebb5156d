"""A cell's resume state: what a run needs to go on after an interruption, saved at each boundary.

:func:`typhoon.training.run.train_and_evaluate` saves it at the end of the MLM phase and after each
fine-tuning epoch, to ``runs/<task>/<backbone>/<strategy>/.seed<k>.resume.pt`` beside the record folder
(:func:`typhoon.records.run_record.resume_state_path`), in one atomic write (:mod:`typhoon.atomic`: a temp
file ``..seed<k>.resume.pt.tmp-<pid>-<random>``, fsynced, renamed; a killed writer's temp file is removed by
the clean-ups, :func:`typhoon.runner.stop.clean_stale_staging` and ``cells.remove_cell_leftovers``). A rerun of the same cell finds it and
goes on from the boundary it names; the record it writes is the uninterrupted run's, bit for bit, but for
wall-clock times and speeds (``metrics.json``'s ``timing`` apart from its counts, the task model's
``warmup_wall_s`` and the measured ``hardware.matmul_peak``). Once a record is written (ok or failed) the
state is removed; a cell that fails starts over.

What it holds:

- ``fingerprint``: the run config (every field, the profile too), the code version (a hash of the
  package's sources and profiles, :func:`typhoon.training.software.code_version`), torch's version and the
  resolved device, precision, kernels and thread count. A state whose fingerprint differs from the rerun's is refused: the cell starts over,
  and says why (:func:`load`).
- ``boundary``: where it was saved, a :class:`~typhoon.training.boundary.Boundary` kept as a small dict: the end of
  the MLM phase (a run; a study's curve: of each MLM epoch) or of fine-tuning epoch ``e``.
- ``rng``: every random generator the run draws from: torch's global CPU generator (dropout) and the
  CUDA ones, numpy's global and Python's ``random`` (the run draws from neither; kept so that nothing
  differs), the run's data-order generator (``RunContext.rng``) and its mask generator.
- ``strategy``: the masking strategy's state (Typhoon's EMA weights, seen tokens, step count).
- ``models``: after a run's MLM phase the adapted encoder (the MLM head and the MLM optimizer end with the
  phase: fine-tuning starts a fresh classifier head and optimizer from the encoder); after an epoch of a phase
  that goes on (a fine-tuning epoch, a study's curve's MLM epoch) its model, AdamW state and learning-rate schedule
  (:meth:`typhoon.training.callbacks.PhaseState.save`).
- ``progress``: the metrics so far, as JSON text: a run's phase-1 outcome (the MLM loss rows, the timing, the
  full-mask loss, the task model's check) and wall time so far, and the phase in progress under its name
  (``ft``, ``mlm``): its epochs, rows, token and step counts and FLOP meter. What a study's curve writes of its own
  (its trace, its epochs' KL) is in its own files, never here.

A state of another format (``FORMAT``; the first named its boundary by a string) is refused, saying so.

It loads with ``torch.load(weights_only=True)``: tensors, numbers, strings, lists and dicts only.
"""

from __future__ import annotations

import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from typhoon import _faults
from typhoon.atomic import written_atomically
from typhoon.training.boundary import Boundary
from typhoon.training.software import code_version

FORMAT = 2  # the layout of the state; a state of another layout is refused (1: boundaries named by strings)


def fingerprint(ctx) -> dict:
    """What a state must match to be resumed: the run config, the code, and how the run executes."""
    return {"format": FORMAT, "config": ctx.config.to_dict(), "code": code_version(), "torch": torch.__version__,
            "device": str(ctx.device), "precision": ctx.precision.name, "attention": ctx.attention,
            "dropout": ctx.dropout, "threads": torch.get_num_threads()}


def _as_text(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def fingerprint_differences(saved: dict, current: dict) -> list[str]:
    """The names of the fingerprint entries (``config.<field>`` for the config) that differ."""
    differ = []
    for key in sorted(saved.keys() | current.keys()):
        a, b = saved.get(key), current.get(key)
        if key == "config" and isinstance(a, dict) and isinstance(b, dict):
            differ += [f"config.{k}" for k in sorted(a.keys() | b.keys()) if _as_text(a.get(k)) != _as_text(b.get(k))]
        elif _as_text(a) != _as_text(b):
            differ.append(key)
    return differ


# --------------------------------------------------------------------------------------------------
# Random generators


def rng_states(ctx) -> dict:
    """Every generator the run draws from, as tensors, ints and strings (``weights_only`` loads them)."""
    legacy = np.random.get_state()
    version, internal, gauss = random.getstate()
    return {
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
        "numpy_global": [legacy[0], torch.from_numpy(legacy[1].astype(np.int64)), *map(_plain, legacy[2:])],
        "python_random": [version, list(internal), gauss],
        "data_order": _plain(ctx.rng.bit_generator.state),
        "masks": ctx.mask_generator.get_state(),
    }


def _plain(value):
    """numpy scalars and dicts of them as Python ints and floats."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.item() if hasattr(value, "item") else value


def restore_rng_states(ctx, states: dict) -> None:
    torch.set_rng_state(states["torch_cpu"])
    if states["torch_cuda"]:
        torch.cuda.set_rng_state_all(states["torch_cuda"])
    name, key, pos, has_gauss, cached = states["numpy_global"]
    np.random.set_state((name, key.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = states["python_random"]
    random.setstate((version, tuple(internal), gauss))
    ctx.rng.bit_generator.state = states["data_order"]
    ctx.mask_generator.set_state(states["masks"])


# --------------------------------------------------------------------------------------------------
# Masking strategy state (numpy arrays as tensors, the meta as JSON text)


def strategy_state(strategy) -> dict:
    state = strategy.state_dict()
    return {"meta": json.dumps(state["meta"], sort_keys=True),
            "arrays": {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items() if k != "meta"}}


def restore_models(saved: SavedState, **modules) -> None:
    """Load each of a phase's saved state dicts into its module (the model, the optimizer, the schedule: by the
    name it was saved under), then let the copies go: they need not stay in memory through the epochs to come."""
    for name, module in modules.items():
        module.load_state_dict(saved.models[name])
    saved.models.clear()


def load_strategy_state(strategy, saved: dict) -> None:
    strategy.load_state_dict({"meta": json.loads(saved["meta"]), **{k: v.numpy() for k, v in saved["arrays"].items()}})


# --------------------------------------------------------------------------------------------------
# Saving and loading


@dataclass
class SavedState:
    """A resume state as :func:`load` gives it back: its boundary, generators, strategy state, models (state
    dicts by name) and progress (parsed)."""

    boundary: Boundary
    rng: dict
    strategy: dict
    models: dict
    progress: dict


def save(path: Path, ctx, boundary: Boundary, *, strategy, models: dict, progress: dict, record_path: str) -> float:
    """Write the state of ``ctx``'s run at ``boundary`` to ``path`` atomically; returns the seconds it
    took. ``models``: state dicts (tensors); ``progress``: JSON-able metrics so far."""
    import time

    started = time.perf_counter()
    state = {"fingerprint": _as_text(fingerprint(ctx)), "boundary": boundary.saved(), "rng": rng_states(ctx),
             "strategy": strategy_state(strategy), "models": models,
             "progress": json.dumps(progress, sort_keys=True, default=_json_default)}
    with written_atomically(path) as tmp, open(tmp, "wb") as fh:  # straight to the file: no second copy in memory
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    seconds = time.perf_counter() - started
    _faults.maybe_inject(f"state_saved:{boundary.label}", record_path, path)
    return seconds


def _json_default(value):
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to the resume state")


def load(path: Path, ctx, record_path: str) -> SavedState | None:
    """The state at ``path`` if it is one of this run (same config, code and execution), else None.

    A state that cannot be read, was written in another format or belongs to another run is refused: the cell
    starts over, and a line on stderr says why (the state is replaced at the run's first boundary). A usable one
    is returned with its ``progress`` parsed, and a line on stdout says where the run goes on from (news,
    nothing to act on).
    """
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        saved = json.loads(state["fingerprint"])
        differ = fingerprint_differences(saved, fingerprint(ctx))
    except Exception as err:  # a damaged or foreign file: start over rather than fail the cell
        _say(f"{record_path}: resume state {path.name} is unreadable ({type(err).__name__}: {err}); starting over")
        return None
    if saved.get("format") != FORMAT:
        _say(f"{record_path}: resume state {path.name} was written by another version of the bundle (state format "
             f"{saved.get('format')}, this version reads {FORMAT}); starting over")
        return None
    if differ:
        _say(f"{record_path}: resume state {path.name} belongs to another run (differs in {', '.join(differ)}); "
             "starting over")
        return None
    loaded = SavedState(Boundary.from_saved(state["boundary"]), state["rng"], state["strategy"], state["models"],
                        json.loads(state["progress"]))
    print(f"typhoon: {record_path}: resuming after {loaded.boundary.describe()} from {path.name}", flush=True)
    return loaded


def saved_boundary(path: Path) -> Boundary | None:
    """The boundary of the resume state at ``path``, read without loading its tensors (a memory map): what a
    batch says of a cell before it runs it. None: there is none, or it cannot be read, or it is of an earlier
    format (the run will start over, and say why)."""
    if not Path(path).exists():
        return None
    try:
        return Boundary.from_saved(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["boundary"])
    except Exception:  # a damaged file or an earlier format: the run itself will say so and start over
        return None


def _say(text: str) -> None:
    """A state refused: on stderr, where what the user may act on goes (the cell starts over)."""
    print(f"typhoon: {text}", file=sys.stderr, flush=True)


def remove(path: Path) -> None:
    """Remove the state (the record is complete)."""
    Path(path).unlink(missing_ok=True)
