"""Reuse: a cell with no record of its own copies the record of an equal run made elsewhere.

Two profiles often share cells (the ``bottleneck`` profile's random and min-max cells are the ``cpu``
profile's). Training such a cell twice buys nothing, *if* the other record is what this machine would
have computed. So a record stands in for a cell only when

- it is a finished (``ok``) record of the same run: equal identities (``RunConfig.identity``), every
  ``auto`` resolved -- the record's from what it ran with, the cell's from what this machine would use;
- what decided its bits is what would decide them here (:class:`typhoon.records.run_numerics.BitSource`: the
  numerics -- precision, device kind, matrix-product kernels, attention and dropout kernels --, the CPU's
  vendor and the torch build): a bf16 record is no fp32 run, an AMX record no AVX512-BF16 one, and an Intel
  AVX-512 record no AMD AVX-512 one, nor a record of another torch build (their sums come in another order);
- it lies where reuse may look (:func:`reuse_candidates`): the output folders beside this one and under
  ``<repo>/outputs/``, of another profile. The committed reference runs (``<repo>/results/``) are never
  searched unless named (``reproduce --reuse-from results/cpu``): a reproduction that copied the results
  it is meant to check would check nothing. A named folder may hold the same profile's records.

A copy says where it came from (``metrics.json``: ``reused_from``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from typhoon import paths
from typhoon.atomic import atomic_write_bytes, atomic_write_json, staged_dir
from typhoon.config import RunConfig
from typhoon.records import run_numerics
from typhoon.records.locks import LockedError, record_lock
from typhoon.records.run_record import (
    identity_matches,
    is_complete,
    read_config,
    read_json,
    resolved_config,
    resume_state_path,
)


def reuse_candidates(out_dir: Path, reuse_from: Sequence[Path] = ()) -> list[Path]:
    """Output folders where an equal run's record may lie, in the order they are searched: the folders
    named in ``reuse_from``, then ``out_dir``'s siblings and ``<repo>/outputs/*``, leaving out anything
    under ``<repo>/results/`` that was not named."""
    out_dir = Path(out_dir).resolve()
    committed = (paths.repo_root() / "results").resolve()
    named = [Path(folder).resolve() for folder in reuse_from]
    found: list[Path] = [folder for folder in dict.fromkeys(named) if folder != out_dir]
    for parent in (out_dir.parent, paths.repo_root() / "outputs"):
        if not parent.is_dir():
            continue
        for folder in sorted(p.resolve() for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if folder in found or folder == out_dir or not (folder / "runs").is_dir():
                continue
            if folder.is_relative_to(committed):
                continue  # a committed reference run: only when named
            found.append(folder)
    return found


@dataclass
class ReusePlan:
    """What :func:`reuse_equal_records` did: the records copied, and the equal runs it left because they
    ran with other numerics, CPU vendor or torch build (so the user sees why a cell trains although an equal
    record exists)."""

    copied: list[dict] = field(default_factory=list)  # {"record_path", "reused_from"}
    other_numerics: list[dict] = field(default_factory=list)  # {"record_path", "source", "theirs", "ours"}
    lacking: list[dict] = field(default_factory=list)  # {"record_path", "source", "missing"}: predate a needed field

    def lines(self) -> list[str]:
        out = [f"reused {c['record_path']} from {paths.shown(c['reused_from'])}" for c in self.copied]
        if self.other_numerics:
            theirs = sorted({o["theirs"] for o in self.other_numerics})
            ours = sorted({o["ours"] for o in self.other_numerics})
            out.append(f"not reused: {len(self.other_numerics)} equal record(s) ran with other numerics, CPU vendor or "
                       f"torch build ({'; '.join(theirs)}) than this machine would use ({'; '.join(ours)}); those cells "
                       "train here")
        if self.lacking:
            missing = sorted({m for o in self.lacking for m in o["missing"]})
            out.append(f"not reused: {len(self.lacking)} equal record(s) hold no {', '.join(missing)}, which this "
                       "profile's analysis needs (they predate it); those cells train here")
        return out


def finished_record_of(run_dir: Path, config: RunConfig) -> tuple[RunConfig, dict] | None:
    """The stored config and metrics of the finished (``ok``) record in ``run_dir`` if it computed
    ``config``'s run, of whatever profile (an ``auto`` in ``config`` matches what the record resolved it
    to; the numerics are the caller's to judge); None otherwise."""
    stored, metrics = read_config(run_dir), read_json(Path(run_dir) / "metrics.json")
    if stored is None or not metrics or metrics.get("status") != "ok":
        return None
    return (stored, metrics) if identity_matches(resolved_config(stored, metrics), config) else None


def find_equal_record(config: RunConfig, out_dir: Path, reuse_from: Sequence[Path] = (), *,
                      here: run_numerics.BitSource,
                      required: Sequence[str] = ()) -> tuple[Path | None, list[dict]]:
    """The first record under :func:`reuse_candidates` that can stand in for ``config``'s run on this
    machine (``here``: what decides a run's bits here, :func:`typhoon.training.device_settings.bit_source_here`;
    only a record whose :class:`~typhoon.records.run_numerics.BitSource` is known and equal) and holds every
    metric in ``required`` (the profile's ``required_metrics``), and the equal runs passed over on the way
    (with ``theirs``/``ours`` numerics, or the ``missing`` metrics). Records of the same profile count only
    in a named folder: in another folder they are a separate reproduction of the same grid, which must run
    for itself."""
    named = {Path(folder).resolve() for folder in reuse_from}
    passed_over = []
    for folder in reuse_candidates(out_dir, reuse_from):
        run_dir = folder / config.relative_dir()
        found = finished_record_of(run_dir, config)
        if found is None or (found[0].profile == config.profile and folder not in named):
            continue
        missing = [name for name in required if found[1].get(name) is None]
        if missing:
            passed_over.append({"record_path": config.relative_dir().as_posix(), "source": str(run_dir),
                                "missing": missing})
            continue
        theirs = run_numerics.bit_source_of_metrics(found[1])
        if not theirs.same_bits_expected(here):
            passed_over.append({"record_path": config.relative_dir().as_posix(), "source": str(run_dir),
                                "theirs": theirs.label, "ours": here.label})
            continue
        return run_dir, []  # found: what was passed over on the way does not matter
    return None, passed_over


def reuse_record(config: RunConfig, out_dir: Path, source: Path) -> None:
    """Copy the record in ``source`` to ``config``'s folder under ``out_dir``, atomically (staging folder,
    one rename). Its stored config keeps what actually ran, under this profile's name (so it is a
    complete record of this cell, ``records.is_complete``); ``metrics.json`` gains ``reused_from``
    (the source profile and folder, shown relative to the repository). The source's executed cell
    notebook is copied too, when there is one."""
    out_dir, source = Path(out_dir), Path(source)
    run_dir = out_dir / config.relative_dir()
    stored, metrics = read_config(source), read_json(source / "metrics.json")
    if stored is None or metrics is None or not identity_matches(resolved_config(stored, metrics), config):
        raise ValueError(f"{source} is not a complete record of the run {config.describe()}")
    with record_lock(run_dir):
        with staged_dir(run_dir) as staging:
            shutil.copytree(source, staging, dirs_exist_ok=True)
            ran = resolved_config(stored, metrics).replace(profile=config.profile)
            atomic_write_json(staging / "config.json", ran.to_dict())
            metrics["reused_from"] = {"profile": stored.profile, "record": paths.shown(source)}
            atomic_write_json(staging / "metrics.json", metrics)
        resume_state_path(run_dir).unlink(missing_ok=True)  # complete now: an interrupted run's state has no use
    rel = config.relative_dir()
    notebook = source.parents[len(rel.parts) - 1] / "notebooks" / rel.parent / f"{rel.name}.ipynb"
    if notebook.is_file():
        atomic_write_bytes(out_dir / "notebooks" / rel.parent / f"{rel.name}.ipynb", notebook.read_bytes())


def reuse_equal_records(configs: list[RunConfig], out_dir: Path, reuse_from: Sequence[Path] = (),
                        required: Sequence[str] = (), *,
                        bit_source_here: Callable[[RunConfig], run_numerics.BitSource]) -> ReusePlan:
    """For every cell without a complete record in ``out_dir``, copy a record that can stand in for it
    (:func:`find_equal_record` with the ``required`` metrics, :func:`reuse_record`); ``bit_source_here``: what
    would decide a config's bits on this machine (:func:`typhoon.training.device_settings.bit_source_here`,
    which the training stage resolves)."""
    plan = ReusePlan()
    for config in configs:
        if is_complete(Path(out_dir) / config.relative_dir(), config):
            continue
        source, passed_over = find_equal_record(config, out_dir, reuse_from, here=bit_source_here(config),
                                                 required=required)
        plan.other_numerics += [p for p in passed_over if "missing" not in p]
        plan.lacking += [p for p in passed_over if "missing" in p]
        if source is None:
            continue
        try:
            reuse_record(config, out_dir, source)
        except LockedError:
            continue  # someone is writing this cell right now: let the grid see what they leave
        plan.copied.append({"record_path": config.relative_dir().as_posix(), "reused_from": str(source)})
    return plan
