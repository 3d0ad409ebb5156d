"""Where a set of results came from: the machine, commit, lock and wall time of each ``reproduce`` into an
output folder (``MANIFEST.json``), the numerics its runs used, and committing records to git as they
complete (for a reference run that resumes on any machine).

**Numerics.** A run's numbers depend on the precision it trained in and the kind of device: bf16
autocast on one CPU and fp32 on another give different metrics for the same config and seed, as do a
CPU and a GPU. A record says both (``metrics.json``: ``precision``, ``device``). One reference run must
not mix them silently: :func:`check_numerics` refuses to add cells to a grid whose finished records
used other numerics than this machine would use, unless mixing is allowed -- then ``results.csv`` keeps
each run's precision and the report and README say the mix. The attention and dropout kernels are not
part of it: with ``auto`` they follow the device kind, and when set they are part of the run's config
(its identity), and their variants are tested to compute the same model.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from typhoon import paths, records

if TYPE_CHECKING:
    from typhoon.config import RunConfig

MANIFEST = "MANIFEST.json"
# The dependency locks a run can be pinned by (the first ones that exist are hashed).
LOCK_FILES = ("requirements/runtime.txt", "requirements/dev.txt", "uv.lock")
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")  # those that decide the fast precision


# --------------------------------------------------------------------------------------------------
# Numerics


def numerics(precision: str | None, device: str | None) -> str:
    """The numerics of a run, as a label: ``"<precision> on <device kind>"``, e.g. ``"bf16 on cpu"``."""
    kind = str(device or "unknown").split(":")[0]
    return f"{precision or 'unknown'} on {kind}"


# Environment variables that cap the instruction set oneDNN / MKL dispatch to (an AVX2 emulation on an
# AVX-512 CPU): part of a run's numerics, since another kernel sums in another order.
ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def kernel_family(precision: str, device_kind: str, cpu: dict | None, env: dict | None = None) -> str:
    """The family of matrix-product kernels a run's numbers came from: ``amx``, ``avx512_bf16``,
    ``avx512``, ``avx2`` or ``generic`` on a CPU (from its feature flags, ``CpuFeatures.to_dict()``, and any
    ISA cap in ``env``), the device kind elsewhere. Two CPUs of one family run the same kernels; AMX and
    AVX512-BF16 both compute bf16 products, but accumulate in different orders, so their records differ."""
    if device_kind != "cpu":
        return device_kind
    cpu = cpu or {}
    if precision == "bf16":
        family = "amx" if cpu.get("amx_bf16") else "avx512_bf16" if cpu.get("avx512_bf16") else "generic"
    else:
        family = "avx512" if cpu.get("avx512f") else "avx2" if cpu.get("avx2") else "generic"
    caps = [f"{name}={value}" for name, value in sorted((env or {}).items()) if name in ISA_CAPS and value]
    return family + (f" ({', '.join(caps)})" if caps else "")


@dataclass(frozen=True)
class Numerics:
    """Everything about where a run ran that changes its numbers, resolved (never ``auto``).

    ``label`` is the coarse kind the tables and the mixing check speak of (bf16 vs fp32, CPU vs GPU);
    ``key`` adds the kernels (AMX vs AVX512-BF16, AVX-512 vs AVX2 products, the attention and dropout
    kernels): two records can only be bit-identical, and a record can only stand in for a run of this
    machine, when their keys are equal.
    """

    precision: str
    device: str  # the device kind: cpu | cuda | mps
    kernels: str  # kernel_family()
    attention: str
    dropout: str

    @property
    def label(self) -> str:
        return numerics(self.precision, self.device)

    @property
    def key(self) -> str:
        return f"{self.label} ({self.kernels}), {self.attention} attention, {self.dropout} dropout"

    def to_dict(self) -> dict:
        return asdict(self)


def numerics_of_metrics(metrics: dict) -> Numerics:
    """The numerics a record ran with, from its ``metrics.json``: its ``numerics`` entry where it has one,
    else worked out from what older records stored (precision, device, kernels, CPU flags)."""
    if isinstance(metrics.get("numerics"), dict):
        return Numerics(**metrics["numerics"])
    device = str(metrics.get("device") or "unknown").split(":")[0]
    precision = str(metrics.get("precision") or "unknown")
    cpu = (metrics.get("hardware") or {}).get("cpu")
    return Numerics(precision, device, kernel_family(precision, device, cpu),
                    str(metrics.get("attention") or "unknown"), str(metrics.get("dropout") or "unknown"))


def record_numerics(run_dir: Path) -> str | None:
    """The numerics label a finished (status ok) record used; None when there is no such record."""
    found = record_numerics_detail(run_dir)
    return found.label if found else None


def record_numerics_detail(run_dir: Path) -> Numerics | None:
    """The full numerics (:class:`Numerics`) a finished (status ok) record used; None without such a record."""
    metrics = records.read_json(Path(run_dir) / "metrics.json")
    if not metrics or metrics.get("status") != "ok":
        return None
    return numerics_of_metrics(metrics)


def planned_numerics(config: RunConfig) -> str:
    """The numerics label ``config`` would run with on this machine (what ``auto`` resolves to here)."""
    return numerics_here(config).label


def numerics_here(config: RunConfig) -> Numerics:
    """The full numerics ``config`` would run with on this machine: every ``auto`` resolved here."""
    from typhoon import hardware

    device = hardware.resolve_device(config.device)
    return numerics_of_run(hardware.choose_precision(config.precision, device).name, device,
                           hardware.resolve_attention(config.attention, device),
                           hardware.resolve_dropout(config.dropout, device))


def numerics_of_run(precision: str, device, attention: str, dropout: str) -> Numerics:
    """The numerics of a run on this machine with these resolved choices (``device``: a torch.device)."""
    from typhoon import hardware

    kind = device.type
    kernels = kernel_family(precision, kind, hardware.cpu_features().to_dict(), dict(os.environ))
    if kind == "cuda":  # another GPU model runs other kernels
        import torch

        kernels = f"cuda ({torch.cuda.get_device_name(device)})"
    return Numerics(precision, kind, kernels, attention, dropout)


def check_numerics(configs: list[RunConfig], out_dir: Path, allow_mixed: bool = False) -> dict[str, int]:
    """The numerics of the grid once its missing cells run here: ``{label: number of runs}``.

    Raises ValueError, before anything runs, when the finished records and the cells still to run would
    use more than one kind of numerics, naming them, unless ``allow_mixed``.
    """
    counts: Counter[str] = Counter()
    todo = []
    for config in configs:
        run_dir = out_dir / config.relative_dir()
        done = record_numerics(run_dir) if records.is_complete(run_dir, config) else None
        if done is None:
            todo.append(config)
        else:
            counts[done] += 1
    finished = dict(counts)
    planned = Counter(planned_numerics(c) for c in todo)
    counts.update(planned)
    if len(counts) > 1 and not allow_mixed:
        raise ValueError(
            f"{paths.shown(out_dir)} would mix numerics: its finished records used "
            f"{_describe(finished) or 'nothing yet'}, and this machine would run the {len(todo)} missing cell(s) in "
            f"{_describe(dict(planned))}. Finish the grid where it started (or set precision explicitly with "
            "--set precision=...), or pass --allow-mixed-precision: the tables and the report then say the mix.")
    return dict(counts)


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{label} ({n} run{'s' if n != 1 else ''})" for label, n in sorted(counts.items()))


def results_numerics(results) -> dict[str, int]:
    """``{numerics label: runs}`` over the ok rows of a results table (its ``precision`` and ``device``)."""
    ok = results[results["status"].astype(str) == "ok"]
    return dict(Counter(numerics(p, d) for p, d in zip(ok["precision"], ok["device"], strict=True)))


# --------------------------------------------------------------------------------------------------
# The machine, the commit, the lock


def machine() -> dict:
    """This machine as a reader needs it to judge the numbers: CPU model, cores, the CPU features that
    decide bf16, memory, OS, Python and torch."""
    import torch

    from typhoon.grid import usable_cores
    from typhoon.hardware import cpu_features

    cpu = cpu_features()

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "cpu": cpu.model or platform.processor() or platform.machine(),
        "cpu_features": [name for name in CPU_FLAGS if getattr(cpu, name)],
        "cores": usable_cores(),
        "memory_gib": _memory_gib(),
        "gpus": gpus,
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def machine_line(info: dict) -> str:
    """One line for a header: ``"Intel Xeon ..., 2 cores (avx512_bf16, ...), 15.6 GiB"``."""
    parts = [f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores"]
    if info.get("cpu_features"):
        parts[0] += f" ({', '.join(info['cpu_features'])})"
    if info.get("memory_gib"):
        parts.append(f"{info['memory_gib']:.0f} GiB")
    if info.get("gpus"):
        parts.append("GPU: " + ", ".join(info["gpus"]))
    return "; ".join(parts)


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)


def git_state(repo: Path | None = None) -> dict:
    """The commit of the code that ran and whether the tracked files differed from it (``dirty``)."""
    repo = repo or paths.repo_root()

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", "typhoon", "notebooks", "pyproject.toml")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def lock_state(repo: Path | None = None) -> dict:
    """The SHA-256 of each dependency lock file the repository has (:data:`LOCK_FILES`)."""
    repo = repo or paths.repo_root()
    return {name: hashlib.sha256((repo / name).read_bytes()).hexdigest()
            for name in LOCK_FILES if (repo / name).is_file()}


# --------------------------------------------------------------------------------------------------
# The manifest of an output folder


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def read_manifest(out_dir: Path) -> dict | None:
    return records.read_json(Path(out_dir) / MANIFEST)


def check_profile(out_dir: Path, profile: str) -> None:
    """Refuse an output folder that already holds another profile's results (one folder, one profile)."""
    manifest = read_manifest(out_dir)
    if manifest and manifest.get("profile") not in (None, profile):
        raise ValueError(f"{paths.shown(out_dir)} holds the {manifest['profile']!r} profile's results "
                         f"({MANIFEST}); run {profile!r} into its own folder (the default: "
                         f"{paths.shown(paths.output_dir(profile))})")


def write_manifest(out_dir: Path, profile: str, started: str, wall_s: float, command: list[str],
                   numerics_counts: dict[str, int], cells, code: dict | None = None,
                   estimate: dict | None = None) -> dict:
    """Write ``<out_dir>/MANIFEST.json`` for a ``reproduce`` that started at ``started`` and took ``wall_s``.

    ``code``: :func:`git_state` taken when the invocation started (committing records moves HEAD on);
    None takes it now. ``estimate``: the invocation's estimate (:mod:`typhoon.estimate`), kept beside its
    real ``wall_s``.

    Earlier invocations into the same folder (a grid resumed on another day or machine) are kept under
    ``history``, newest last, so the manifest says every machine and commit the records came from; a
    second write by the same invocation (after the analysis) replaces its first.
    ``runs_wall_s`` sums the wall time of every finished record (what the grid cost, resumed or not).
    """
    out_dir = Path(out_dir)
    previous = read_manifest(out_dir) or {}
    history = previous.pop("history", [])
    if previous.get("started") and previous.get("started") != started:
        history.append(previous)
    results = records.collect_results(out_dir)
    ok = results[results["status"].astype(str) == "ok"] if len(results) else results
    status = cells["status"].value_counts().to_dict() if len(cells) else {}
    manifest = {
        "profile": profile,
        "command": " ".join(["python -m typhoon", *command]) if command else None,
        "started": started,
        "finished": now(),
        "wall_s": round(wall_s, 1),
        "cells": {str(k): int(v) for k, v in status.items()},
        "runs_ok": int(len(ok)),
        "runs_wall_s": round(float(ok["wall_s"].sum()), 1) if len(ok) else 0.0,
        "numerics": numerics_counts,
        "machine": machine(),
        **(code or git_state()),
        "locks": lock_state(),
        "history": history,
        **({"estimate": estimate} if estimate else {}),
    }
    records.atomic_write_json(out_dir / MANIFEST, manifest)
    return manifest


def invocation() -> list[str]:
    """The command line of this process as ``typhoon`` arguments (for the manifest); [] when this
    process is not the ``typhoon`` command (e.g. ``reproduce`` called from Python)."""
    program = Path(sys.argv[0]).name if sys.argv else ""
    if program not in ("__main__.py", "typhoon"):
        return []
    return [paths.redact(arg) for arg in sys.argv[1:]]


# --------------------------------------------------------------------------------------------------
# Committing records as they complete


def check_git_repo(out_dir: Path) -> Path:
    """The git work tree that holds ``out_dir``; ValueError when there is none."""
    out_dir = Path(out_dir).resolve()
    probe = out_dir if out_dir.is_dir() else out_dir.parent
    while not probe.is_dir():
        probe = probe.parent
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=probe, capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError) as err:
        raise ValueError(f"--commit-records needs git: {err}") from None
    if top.returncode != 0:
        raise ValueError(f"--commit-records: {paths.shown(out_dir)} is not inside a git work tree")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(out_dir)], cwd=probe).returncode == 0
    if ignored:
        raise ValueError(f"--commit-records: git ignores {paths.shown(out_dir)}; write the reference run into a "
                         f"tracked folder, e.g. --out results/<profile>")
    return Path(top.stdout.strip())


def commit_paths(repo: Path, files: list[Path], message: str) -> bool:
    """Add ``files`` (folders: what git does not ignore in them, so never the lock files) and commit exactly
    them, nothing else that is staged; False when nothing changed."""
    names = [os.path.relpath(f, repo) for f in files if Path(f).exists()]
    if not names:
        return False
    subprocess.run(["git", "add", "--", *names], cwd=repo, check=True, capture_output=True)
    changed = subprocess.run(["git", "diff", "--cached", "--quiet", "--", *names], cwd=repo).returncode != 0
    if changed:
        subprocess.run(["git", "commit", "--quiet", "-m", message, "--", *names], cwd=repo, check=True,
                       capture_output=True)
    return changed


def commit_cell(out_dir: Path, row: dict) -> bool:
    """Commit one finished cell's record and executed notebook (``row``: its grid status row)."""
    out_dir = Path(out_dir)
    repo = check_git_repo(out_dir)
    files = [out_dir / row["record_path"]]
    if row.get("notebook"):
        files.append(out_dir / row["notebook"])
    return commit_paths(repo, files, f"{paths.shown(out_dir)}: {row['status']} {row['record_path']}")
