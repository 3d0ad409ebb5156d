"""The real-SLURM check of ``reproduce --cluster slurm``: a one-node SLURM on this machine, grids and a design.

Installs Debian's ``slurm-wlm`` and ``munge`` if they are missing (as root), writes a one-node
``slurm.conf`` (node ``localhost`` on 127.0.0.1, state, spool and logs under a temp folder), starts
munged, slurmctld and slurmd, and runs the smoke profile's six tiny cells (on less data: :data:`PROFILES`,
the same in every run) four times:

- ``local``: the reference table: the same cells trained one after another in this script's process (no
  notebook, no cluster), as :func:`run_local` says why;
- ``plain``: ``--cluster slurm`` with two jobs;
- ``scancel``: the same, with one job cancelled while its cell is mid-run (the cell must run again on a
  replacement job, and its temp notebook must go);
- ``walltime``: one job at a time with a 4-minute limit, and the package's fault injection making the loss
  certain whatever the machine's speed (:func:`walltime_faults`): the grid's second cell hangs on its first
  attempt, so its job is surely ended by the walltime mid-cell, and runs through on its retry on the
  replacement job; the first cell sleeps long enough that the hung one starts well into the job, so the
  executor never mistakes it for a cell longer than a job;
- ``kl-curve``: one epoch of a kl-original curve run (the study's MRPC seed 0, its real config: minutes on a CPU)
  as a cell of the one study loop, on the local pool and as a SLURM job at the same time; the curve files it writes
  (``epochs.csv``, ``trace.csv``, ``mlm_loss.csv``, ``epoch1/masking_state.npz``) must be identical byte for byte;
- ``design``: a sequential design (``tiny-design`` in :data:`PROFILES`, two comparisons on the tiny backbone, looks at 3
  and 6 seeds, a wide margin; a profiles file of its own, ``TYPHOON_PROFILES``) run locally and then with
  ``--cluster slurm``: the cluster run must train look by look and stop where the rule says, with the local
  run's records, looks and verdicts.

Each SLURM run must end with every cell ok (exit 0), no temp file left under its output folder, and a
results table whose metric columns equal the local run's. The times of the runs are printed at the end.
tests/test_slurm.py runs ``walltime`` (its jobs are lost mid-cell, as ``scancel``'s is); the others are run by hand.

Exit status: 0 passed, 1 a check failed, 3 SLURM could not be set up here (not root, apt failed, a daemon
did not start): the test (tests/test_slurm.py) skips with the printed reason.

    sudo .venv/bin/python scripts/slurm_check.py [--keep] [--modes plain,scancel,walltime,design]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from one_node_slurm import OneNodeSlurm, SetupError, install_slurm, say  # beside this script

REPO = Path(__file__).resolve().parents[1]
SKIP = 3
# Columns of results.csv that are measurements of time or speed, not results.
TIMING = ("mlm_wall_s", "ft_wall_s", "wall_s", "mlm_tokens_per_s", "ft_tokens_per_s", "error")
MODES = ("plain", "scancel", "walltime", "design", "kl-curve")
CURVE_FILES = ("epochs.csv", "trace.csv", "mlm_loss.csv", "epoch1/masking_state.npz")  # a curve epoch's, compared byte for byte
# The walltime mode (walltime_faults): how late after its limit a job may be seen gone. slurmctld enforces
# limits every 30 s and gives KillWait (5 s) before SIGKILL; the executor looks each second.
SLURM_KILL_LAG_S = 45
DEFAULT_MODES = ("plain", "scancel", "walltime")
# The check's own profiles (a profiles file of its own, ``TYPHOON_PROFILES``), with the smoke profile's tiny
# cells on less data: the check is about jobs and cells, not numbers. The smoke grid's MiniLM cell is left
# out: it runs the same code as a tiny one, and on a loaded machine it could outlast the walltime mode's job.
TINY_SETTINGS = """max_train_examples = 48
max_eval_examples = 32
max_length = 32
batch_size = 16
mlm_epochs = 1
ft_epochs = 1
ft_lr = 1e-4
precision = "fp32"
num_threads = 1"""
# tiny-grid: the grids of the plain, scancel and walltime modes, 6 cells.
# tiny-design: the design mode's, 9 cells a look. With a margin of 0.5 F1 the rule can say "equivalent" at
# the first look (3 seeds); the check asks only that the cluster run stops where the local one does, with
# its verdicts.
PROFILES = f"""
[tiny-grid]
description = "The smoke profile's tiny cells on less data (scripts/slurm_check.py)."
tasks = ["mrpc"]
backbones = ["tiny-random"]
strategies = ["random", "whole_word", "typhoon"]
seeds = [0, 1]
workers = 2
pipeline_check = true
[tiny-grid.settings]
{TINY_SETTINGS}

[tiny-design]
description = "Two comparisons on the tiny backbone as a sequential design (scripts/slurm_check.py)."
tasks = ["mrpc"]
backbones = ["tiny-random"]
strategies = ["random", "whole_word", "typhoon"]
seeds = [0, 1, 2, 3, 4, 5]
workers = 2
pipeline_check = true
[tiny-design.settings]
{TINY_SETTINGS}
[tiny-design.design]
comparisons = [["whole_word", "random"], ["typhoon", "random"]]
looks = [3, 6]
alpha = 0.5
familywise = "bonferroni"
spending = "pocock"
reuse_from = []
never_reuse = []
power = 0.8
[tiny-design.design.margin]
mrpc = 0.5
[tiny-design.design.planning_sd.mrpc]
"whole_word - random" = 0.05
"typhoon - random" = 0.05
[tiny-design.design.why]
margin = "wide, so that a tiny model's seeds can decide at the first look: the check is about looks on a cluster"
"""


def reproduce_command(out: Path, cluster: dict | None, design: bool = False) -> list[str]:
    command = [sys.executable, "-m", "typhoon", "reproduce", "--profile", "tiny-design" if design else "tiny-grid",
               "--out", str(out), "--no-analysis", "--no-reuse"]
    if cluster is None:
        return [*command, "--no-estimate", "--workers", "2"]
    return [*command, "--cluster", "slurm", "--partition", "check", "--jobs", str(cluster.get("jobs", 2)), "--cpus", "1",
            "--memory", "1GB",
            "--interface", "lo", "--scheduler-option", "dashboard_address=127.0.0.1:0",
            "--walltime", cluster.get("walltime", "00:30:00"), "--retries", str(cluster.get("retries", 2)),
            "--no-worker-timeout", "180"]


def run_mode(mode: str, root: Path, slurm: OneNodeSlurm | None, walltime: str) -> dict:
    """One grid; returns its time and its results table. It runs from ``root/jobs``: the jobs' output files must
    land under the grid's output folder (``<out>/logs/slurm``), none in that working folder."""
    out = root / f"out-{mode}"
    # walltime: one job at a time, its loss made certain by fault injection (walltime_faults)
    design = mode.startswith("design")
    cluster = None if mode in ("local", "design-local") else {"walltime": walltime if mode == "walltime" else "00:30:00",
                                            "retries": 3 if mode == "walltime" else 2,
                                            "jobs": 1 if mode == "walltime" else 2}
    env = {**(slurm.env if slurm else os.environ), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env["TYPHOON_PROFILES"] = str(root / "profiles.toml")
    if mode == "walltime":
        env["TYPHOON_FAULT_INJECT"] = json.dumps(walltime_faults(root, walltime_seconds(walltime)))
    say(f"{mode}: {' '.join(reproduce_command(out, cluster, design)[1:])}")
    started = time.monotonic()
    log_path = root / f"{mode}.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(reproduce_command(out, cluster, design), cwd=root / "jobs", env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        cancelled = cancel_mid_cell(out, slurm, process) if mode == "scancel" else None
        code = process.wait(timeout=1500)
    seconds = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    print("\n".join(f"    | {line}" for line in text.splitlines() if line.strip() and "\r" not in line[-1:]), flush=True)
    problems = []
    if code != 0:
        problems.append(f"exit status {code}")
    if mode == "scancel" and not cancelled:
        problems.append("no job was cancelled mid-cell")
    if mode in ("scancel", "walltime") and "cluster: lost worker" not in text:
        problems.append("no worker was lost (the mode did not exercise a lost job)")
    if cluster is not None:
        stray = sorted(p.name for p in (root / "jobs").iterdir())
        if stray:
            problems.append(f"files in the working folder (job logs belong under the output folder): {stray}")
        if not any((out / "logs" / "slurm").glob("*.out")):
            problems.append("no job output file under <out>/logs/slurm")
    leftovers = sorted(str(p.relative_to(out)) for p in out.rglob("*") if ".tmp-" in p.name or ".old-" in p.name)
    if leftovers:
        problems.append(f"temp files left: {leftovers}")
    # every cell ends ok, so no cell's resume state (typhoon/training/resume.py) may stay: a record removes it
    states = sorted(str(p.relative_to(out)) for p in out.rglob("*.resume.pt*"))
    if states:
        problems.append(f"resume states left: {states}")
    results = pd.read_csv(out / "results.csv") if (out / "results.csv").is_file() else None
    if results is not None and not (results["status"] == "ok").all():
        problems.append(f"cells not ok: {results.loc[results['status'] != 'ok', 'record_path'].tolist()}")
    verdicts = pd.read_csv(out / "stats" / "verdicts.csv") if design and (out / "stats" / "verdicts.csv").is_file() else None
    if design and verdicts is None:
        problems.append("no stats/verdicts.csv: the design's looks were not analysed")
    say(f"{mode}: exit {code} in {seconds:.0f} s" + (f" (cancelled SLURM job {cancelled})" if cancelled else ""))
    if verdicts is not None:
        say(f"{mode}: " + "; ".join(f"{v.comparison} {v.verdict} at {v.n_seeds} seeds" for v in verdicts.itertuples()))
    return {"mode": mode, "seconds": seconds, "results": results, "verdicts": verdicts, "problems": problems}


def curve_command(out: Path, checkpoints: Path, cluster: bool) -> list[str]:
    command = [sys.executable, "-m", "typhoon", "kl-original", "curve", "--tasks", "mrpc", "--seeds", "0",
               "--epochs", "1", "--out", str(out), "--checkpoints", str(checkpoints), "--set", "num_threads=1"]
    if not cluster:
        return [*command, "--workers", "1"]
    return [*command, "--cluster", "slurm", "--partition", "check", "--jobs", "1", "--cpus", "1", "--memory", "3GB",
            "--interface", "lo", "--scheduler-option", "dashboard_address=127.0.0.1:0", "--walltime", "02:00:00",
            "--no-worker-timeout", "300"]


def run_kl_curve(root: Path, slurm: OneNodeSlurm) -> dict:
    """One kl-original curve epoch on the local pool and, at the same time, as a SLURM job (one core each): its files
    must be the same bytes."""
    env = {**slurm.env, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    problems, seconds, folders, running = [], {}, {}, {}
    for where in ("local", "slurm"):
        out, checkpoints = root / f"out-kl-{where}", root / f"checkpoints-{where}"
        command = curve_command(out, checkpoints, cluster=where == "slurm")
        say(f"kl-curve ({where}): {' '.join(command[1:])}")
        log = open(root / f"kl-curve-{where}.log", "w")  # noqa: SIM115 - closed once the process ends
        running[where] = (subprocess.Popen(command, cwd=root / "jobs", env=env, stdout=log, stderr=subprocess.STDOUT),
                          log, time.monotonic())
        folders[where] = out / "curve" / "mrpc" / "seed0"
    for where, (process, log, started) in running.items():
        code = process.wait(timeout=3 * 3600)
        seconds[where] = time.monotonic() - started
        log.close()
        if code != 0:
            problems.append(f"{where}: exit status {code} ({root / f'kl-curve-{where}.log'})")
    for name in CURVE_FILES:
        local, slurm_file = folders["local"] / name, folders["slurm"] / name
        if not (local.is_file() and slurm_file.is_file()):
            problems.append(f"{name}: missing on the {'local' if not local.is_file() else 'slurm'} side")
        elif local.read_bytes() != slurm_file.read_bytes():
            problems.append(f"{name}: the SLURM job's bytes differ from the local pool's")
    say("kl-curve: " + (f"{len(CURVE_FILES)} files identical byte for byte" if not problems else "; ".join(problems))
        + f" (local pool {seconds.get('local', 0):.0f} s, SLURM job {seconds.get('slurm', 0):.0f} s, at once)")
    return {"mode": "kl-curve", "seconds": max(seconds.values(), default=0.0), "results": None, "verdicts": None,
            "problems": problems}


def walltime_seconds(walltime: str) -> int:
    """'00:04:00' (or '04:00', '4') as seconds, as SLURM reads a time limit."""
    parts = [int(p) for p in walltime.split(":")]
    return 60 * parts[0] if len(parts) == 1 else sum(p * 60 ** i for i, p in enumerate(reversed(parts)))


def tiny_grid_order(root: Path) -> list[str]:
    """The tiny grid's cells as ``reproduce`` hands them to the jobs (grid order), as record paths."""
    os.environ["TYPHOON_PROFILES"] = str(root / "profiles.toml")  # before typhoon.config first reads the profiles
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from typhoon.profiles import get_profile

    return [config.relative_dir().as_posix() for config in get_profile("tiny-grid").grid()]


def walltime_faults(root: Path, walltime_s: int) -> list[dict]:
    """The walltime mode's faults (``TYPHOON_FAULT_INJECT``), which make a job's loss by its walltime certain and
    its cell's retry certain, on a fast idle CPU as on a loaded one (issue 50, item 9; issue 52, item 4):

    - the grid's second cell hangs after phase 1 on its first attempt only (``"once"``): the one job then
      running surely reaches its walltime mid-cell; the replacement job runs the cell through;
    - the grid's first cell, the first of that job, sleeps ``lead`` s on every attempt, so the hung cell starts
      at least ``lead`` s into its job and has run for less than the executor's WALLTIME_SHARE (90 %) of the
      walltime when SLURM ends the job, up to :data:`SLURM_KILL_LAG_S` late: it is retried, not failed as a
      cell longer than a job. The first cell itself ends long before the limit: its sleep plus a tiny cell and
      the worker's start leave ``walltime_s - lead`` s (150 s at the default 4 minutes).

    Cells hand out in grid order, one job at a time (``--jobs 1``), so the first two cells are the first job's."""
    first, second = tiny_grid_order(root)[:2]
    lead = int(0.1 * walltime_s) + SLURM_KILL_LAG_S + 20
    return [{"stage": "train", "match": first, "action": "sleep", "seconds": lead},
            {"stage": "train", "match": second, "action": "sleep", "seconds": 10 * walltime_s,
             "once": str(root / "faults")}]


def run_local(root: Path) -> dict:
    """The grid modes' reference table: the tiny grid's six cells trained one after another in this process,
    then ``results.csv`` rebuilt from their records as the grid rebuilds it. A cell's record does not depend on
    the process or the notebook that trains it (tests/test_pipeline.py checks that bit for bit), and one import
    of the training stack here costs about 10 s where ``reproduce``'s six notebook kernels cost a minute."""
    os.environ["TYPHOON_PROFILES"] = str(root / "profiles.toml")  # before typhoon.config first reads the profiles
    sys.path.insert(0, str(REPO))
    from typhoon.profiles import get_profile
    from typhoon.records import result_rows
    from typhoon.training import run as training_run

    out, started = root / "out-local", time.monotonic()
    grid = get_profile("tiny-grid").grid()
    say(f"local: the {len(grid)} cells of tiny-grid in this process")
    for config in grid:
        training_run.run(config, out, progress=False)  # a cell that fails raises, and the check fails with it
    result_rows.collect_results(out, grid).to_csv(out / "results.csv", index=False)
    results = pd.read_csv(out / "results.csv")  # the dtypes the cluster run's results.csv is read with
    seconds = time.monotonic() - started
    say(f"local: {len(grid)} cells in {seconds:.0f} s")
    return {"mode": "local", "seconds": seconds, "results": results, "verdicts": None, "problems": []}


def cancel_mid_cell(out: Path, slurm: OneNodeSlurm, process: subprocess.Popen, timeout_s: float = 600) -> str | None:
    """``scancel`` a running job once a cell is mid-training (a progress file exists, written by the cell's
    kernel); returns the job id."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        running = slurm.jobs("RUNNING")
        if running and list((out / "runs").glob("*/*/*/.seed*.progress.json")):
            time.sleep(2)  # well inside the cell: its kernel is training
            subprocess.run(["scancel", running[0]], env=slurm.env, check=False)
            say(f"scancel: cancelled SLURM job {running[0]} mid-cell")
            return running[0]
        time.sleep(1)
    return None


def metric_columns(frame: pd.DataFrame, sort_by: str = "record_path") -> pd.DataFrame:
    keep = [c for c in frame.columns if c not in TIMING]
    return frame[keep].sort_values(sort_by).reset_index(drop=True)


def compare(reference: pd.DataFrame, results: pd.DataFrame | None, sort_by: str = "record_path") -> list[str]:
    if results is None:
        return ["no results.csv"]
    try:
        pd.testing.assert_frame_equal(metric_columns(reference, sort_by), metric_columns(results, sort_by), check_exact=True)
    except AssertionError as err:
        return [f"results differ from the local run's: {str(err).strip().splitlines()[:6]}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"which SLURM runs, of {','.join(MODES)}")
    parser.add_argument("--walltime", default="00:04:00", help="the jobs' time limit in the walltime mode")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (outputs, logs, slurm.conf)")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - set(MODES):
        parser.error(f"unknown mode(s) {sorted(set(modes) - set(MODES))}")
    root = Path(tempfile.mkdtemp(prefix="typhoon-slurm-check-"))
    (root / "profiles.toml").write_text(PROFILES)  # every run's profiles, the local reference's and the jobs'
    slurm = None
    try:
        try:
            install_slurm()
            slurm = OneNodeSlurm(root)
            slurm.start()
        except (SetupError, OSError, subprocess.SubprocessError) as err:
            print(f"SKIP: SLURM cannot run here: {err}", flush=True)
            return SKIP
        runs = [run_local(root)] if set(modes) - {"design", "kl-curve"} else []
        if "design" in modes:
            runs.append(run_mode("design-local", root, None, args.walltime))
        local = {run["mode"]: run for run in runs}
        for mode in modes:
            if mode == "kl-curve":
                runs.append(run_kl_curve(root, slurm))
                continue
            runs.append(run_mode(mode, root, slurm, args.walltime))
            reference = local["design-local" if mode == "design" else "local"]
            if reference["results"] is not None:
                runs[-1]["problems"] += compare(reference["results"], runs[-1]["results"])
            if mode == "design" and reference["verdicts"] is not None:
                runs[-1]["problems"] += compare(reference["verdicts"], runs[-1]["verdicts"], sort_by="comparison")
        print("\nmode      seconds  outcome")
        for run in runs:
            print(f"{run['mode']:9s} {run['seconds']:7.0f}  {'; '.join(run['problems']) or 'ok: every cell ok, table equal'}")
        failed = [run["mode"] for run in runs if run["problems"]]
        print(f"\nSLURM check {'FAILED: ' + ', '.join(failed) if failed else 'passed'}", flush=True)
        return 1 if failed else 0
    finally:
        if slurm is not None:
            slurm.stop()
            if any(True for _ in (root / "log").glob("*.log")):
                say("slurmctld log tail:\n" + slurm.log_tail("slurmctld", 5))
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
