"""Where a set of results came from: the machine, commit, lock and wall time of each ``reproduce`` into an
output folder (``MANIFEST.json``), the commit each record was trained at, and committing records to git
as they complete (for a reference run that resumes on any machine). The numerics its runs used are
checked in :mod:`typhoon.records.run_numerics`, the machine described by :mod:`typhoon.machine`.

**Numerics.** A run's numbers depend on the precision it trained in and the kind of device: bf16
autocast on one CPU and fp32 on another give different metrics for the same config and seed, as do a
CPU and a GPU. A record says both (``metrics.json``: ``precision``, ``device``). One reference run must
not mix them silently: :func:`typhoon.training.device_settings.check_numerics` refuses to add cells to a
grid whose finished records used other numerics than this machine would use, unless mixing is allowed --
then ``results.csv`` keeps each run's precision and the report and README say the mix. The attention and
dropout kernels are not part of it: with ``auto`` they follow the device kind, and when set they are part
of the run's config (its identity), and their variants are tested to compute the same model.
"""


from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from typhoon import atomic, paths
from typhoon.machine import machine
from typhoon.records import result_rows, run_record

MANIFEST = paths.MANIFEST


# The dependency locks a run can be pinned by (the first ones that exist are hashed).
LOCK_FILES = ("requirements/runtime.txt", "requirements/dev.txt", "uv.lock")


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


CODE_PATHS = ("typhoon", "notebooks", "pyproject.toml")  # what decides a record's numbers (not results/)


def code_commit(commit: str, repo: Path | None = None) -> str:
    """The last commit at or before ``commit`` that changed the code (:data:`CODE_PATHS`), abbreviated:
    a reference run's records are committed one by one, so each record's ``git_commit`` differs, while
    the code they were trained with is the same. ``commit`` itself (abbreviated) when git cannot say."""
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%h", commit, "--", *CODE_PATHS],
                             cwd=repo or paths.repo_root(), capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return commit[:7]
    return out.stdout.strip() or commit[:7]


def trained_at(out_dir: Path, repo: Path | None = None) -> dict[str, int]:
    """How many finished records of ``out_dir`` were trained at each code commit (:func:`code_commit`
    of their ``metrics.json`` ``git_commit``; a reused record keeps the commit that trained it);
    "unknown" for records that do not say."""
    counts: Counter[str] = Counter()
    memo: dict[str, str] = {}
    for path in sorted(Path(out_dir).glob("runs/*/*/*/seed*/metrics.json")):
        metrics = run_record.read_json(path)
        if not metrics or metrics.get("status") != "ok":
            continue
        commit = metrics.get("git_commit")
        if commit and commit not in memo:
            memo[commit] = code_commit(commit, repo)
        counts[memo[commit] if commit else "unknown"] += 1
    return dict(counts.most_common())


def trained_at_line(out_dir: Path, manifest: dict | None = None, repo: Path | None = None) -> str:
    """"18 records trained at a2f9934; tables made at 961ef79": the code commit that trained the records
    beside the commit that made the tables, in one sentence. The counts come from ``manifest``'s
    ``trained_at`` (written with it, so a clone without the history says the same), else from git now."""
    manifest = read_manifest(out_dir) if manifest is None else manifest
    counts = (manifest or {}).get("trained_at") or trained_at(out_dir, repo)
    total = sum(counts.values())
    if not counts:
        text = "no finished records"
    elif len(counts) == 1:
        text = f"{total} records trained at {next(iter(counts))}"
    else:
        text = f"{total} records trained: " + ", ".join(f"{n} at {c}" for c, n in counts.items())
    if manifest and manifest.get("commit"):
        text += f"; tables made at {manifest['commit'][:7]}" + (" with local changes" if manifest.get("dirty") else "")
    return text


def lock_state(repo: Path | None = None) -> dict:
    """The SHA-256 of each dependency lock file the repository has (:data:`LOCK_FILES`)."""
    repo = repo or paths.repo_root()
    return {name: hashlib.sha256((repo / name).read_bytes()).hexdigest()
            for name in LOCK_FILES if (repo / name).is_file()}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def process_age_s() -> float | None:
    """Seconds since this process started; None where it cannot be told. On Linux from the process's start in
    ``/proc/self/stat`` (clock ticks since boot, 10 ms) against the boot clock, which no change of the wall clock
    moves; elsewhere psutil's start time against the wall clock."""
    with contextlib.suppress(OSError, ValueError, IndexError, AttributeError):
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()  # after the name: field 3 on
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22
        if age >= 0:
            return age
    with contextlib.suppress(Exception):
        import psutil

        return max(0.0, time.time() - psutil.Process().create_time())
    return None


def invocation_clock() -> tuple[str, float]:
    """When this invocation began: its start as the manifest says it (ISO, UTC) and the ``time.perf_counter()``
    reading of that moment, so that ``time.perf_counter() - clock`` is its wall time so far. Run as the
    ``typhoon`` command (:func:`invocation`), the invocation is the process: its start-up, imports and input
    checks count. Called from Python, it begins now."""
    age = (process_age_s() if invocation() else None) or 0.0
    clock = time.perf_counter() - age
    return datetime.fromtimestamp(time.time() - age, UTC).isoformat(timespec="seconds"), clock


def close_invocation(out_dir: Path, started: str, wall_s: float) -> bool:
    """The manifest's ``finished`` and ``wall_s`` set for the invocation that began at ``started``, as its last
    write (after the summary, the comparison with the reference and the last lines said): ``wall_s`` is then the
    whole invocation. False, with nothing written, where the manifest describes another invocation or none."""
    manifest = read_manifest(out_dir)
    if not manifest or manifest.get("started") != started:
        return False
    manifest.update(finished=now(), wall_s=round(wall_s, 1))
    atomic.atomic_write_json(Path(out_dir) / MANIFEST, manifest)
    return True


def read_manifest(out_dir: Path) -> dict | None:
    return run_record.read_json(Path(out_dir) / MANIFEST)


def study_profile(out_dir: Path) -> str:
    """The profile a study folder was made with (its MANIFEST.json); ValueError naming what is missing."""
    manifest = read_manifest(out_dir)
    if manifest is None:
        raise ValueError(f"{paths.shown(out_dir)}: no {paths.MANIFEST}, so not the folder of a reproduce")
    if not manifest.get("profile"):
        raise ValueError(f"{paths.shown(out_dir / paths.MANIFEST)} names no profile")
    return manifest["profile"]


def record_stopped_invocation(out_dir: Path, profile: str, started: str, wall_s: float, command: list[str],
                              outcome: str, code: dict | None = None, estimate: dict | None = None) -> None:
    """Add a ``reproduce`` that ended early (``outcome``: "stopped by SIGINT", ...) to the manifest's
    ``history``, with the estimate it made before its cells if any; a folder with no manifest yet gets one
    holding the profile and that history only."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir) or {"profile": profile}
    entry = {"command": " ".join(["python -m typhoon", *command]) if command else None, "started": started,
             "finished": now(), "wall_s": round(wall_s, 1), "outcome": outcome, "machine": machine(),
             **(code or git_state()), **({"estimate": estimate} if estimate else {})}
    manifest["history"] = sorted([*manifest.get("history", []), entry], key=lambda item: item["started"])
    atomic.atomic_write_json(out_dir / MANIFEST, manifest)


def invocations(manifest: dict) -> list[dict]:
    """Every ``reproduce`` into the folder that the manifest knows, oldest first: its history (the stopped
    ones too) and the one it describes."""
    return sorted([*manifest.get("history", []), *([manifest] if manifest.get("started") else [])],
                  key=lambda item: item["started"])


def write_manifest(out_dir: Path, profile: str, started: str, wall_s: float, command: list[str],
                   numerics_counts: dict[str, int], cells, code: dict | None = None,
                   estimate: dict | None = None, grid_wall_s: float | None = None) -> dict:
    """Write ``<out_dir>/MANIFEST.json`` for a ``reproduce`` that started at ``started`` and took ``wall_s``
    so far: the whole of it (cells, tables, notebooks and report) at the last write, after the analysis;
    ``grid_wall_s``, where given, the cells' part alone (from the start to the results table).

    ``code``: :func:`git_state` taken when the invocation started (committing records moves HEAD on);
    None takes it now. ``estimate``: the invocation's estimate (:mod:`typhoon.runner.estimate`), kept beside its
    real ``wall_s``.

    Earlier invocations into the same folder (a grid resumed on another day or machine) are kept under
    ``history``, oldest first, with those stopped early (:func:`record_stopped_invocation`), so the manifest
    says every machine and commit the records came from and every invocation's command, start, end and
    ``outcome``; a second write by the same invocation (after the analysis) replaces its first.
    ``runs_wall_s`` sums the wall time of every finished record (what the grid cost, resumed or not).
    """
    out_dir = Path(out_dir)
    previous = read_manifest(out_dir) or {}
    history = previous.pop("history", [])
    if previous.get("started") and previous.get("started") != started:
        history = sorted([*history, previous], key=lambda item: item["started"])
    results = result_rows.collect_results(out_dir)
    ok = results[results["status"].astype(str) == "ok"] if len(results) else results
    status = cells["status"].value_counts().to_dict() if len(cells) else {}
    manifest = {
        "profile": profile,
        "command": " ".join(["python -m typhoon", *command]) if command else None,
        "started": started,
        "finished": now(),
        "wall_s": round(wall_s, 1),
        **({"grid_wall_s": round(grid_wall_s, 1)} if grid_wall_s is not None else {}),
        "outcome": "finished",
        "cells": {str(k): int(v) for k, v in status.items()},
        "runs_ok": int(len(ok)),
        "runs_wall_s": round(float(ok["wall_s"].sum()), 1) if len(ok) else 0.0,
        "numerics": numerics_counts,
        "trained_at": trained_at(out_dir),
        "machine": machine(),
        **(code or git_state()),
        "locks": lock_state(),
        "history": history,
        **({"estimate": estimate} if estimate else {}),
    }
    atomic.atomic_write_json(out_dir / MANIFEST, manifest)
    return manifest


def invocation() -> list[str]:
    """The command line of this process as ``typhoon`` arguments (for the manifest); [] when this
    process is not the ``typhoon`` command (e.g. ``reproduce`` called from Python, or from pytest, whose
    ``python -m pytest`` is another package's ``__main__.py``)."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    own_main = Path(__file__).resolve().parents[1] / "__main__.py"  # python -m typhoon
    if program is None or not (program.name == "typhoon" or program.resolve() == own_main):
        return []
    return [paths.redact(arg) for arg in sys.argv[1:]]


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
