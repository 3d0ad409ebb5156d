"""A real SLURM: ``scripts/slurm_check.py`` starts a one-node SLURM (Debian's slurm-wlm and munge, on
localhost) and runs the smoke profile's six tiny cells through ``reproduce --cluster slurm`` with one job of a
4-minute walltime at a time, and the package's fault injection making the loss certain by construction: the
second cell hangs on its first attempt (the job surely ends by its walltime mid-cell) and runs through on its
retry, and the first cell sleeps so long that the hung one has run for well under a walltime when its job
ends (it is retried, not failed as too long), whatever the machine's speed or load; the grid must end with
every cell ok and the local run's table. A job ended by its walltime is lost mid-cell, so this one mode exercises what every
lost job needs: the cell retried on a replacement job, what it left gone, the job replaced. The check's other modes (``plain``; ``scancel``, a
job cancelled mid-cell, which is the same loss by another hand; ``design``) are run by hand
(``scripts/slurm_check.py --modes plain,scancel,walltime,design``): each mode costs CI a quarter of the
check. Skipped, with the reason, where SLURM cannot run (not root, no apt, a daemon that does not start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SKIP = 3  # slurm_check.py's exit status when SLURM cannot be set up here


@pytest.mark.slow
def test_smoke_grid_survives_slurm_jobs_ended_by_their_walltime():
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("the SLURM check starts munged, slurmctld and slurmd as root; not root here")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "slurm_check.py"), "--modes", "walltime"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    output = done.stdout + done.stderr
    if done.returncode == SKIP:
        reason = next((line for line in output.splitlines() if line.startswith("SKIP:")), output[-300:])
        pytest.skip(reason)
    summary = output[output.rfind("mode      seconds"):] if "mode      seconds" in output else output[-4000:]
    print(summary)
    assert done.returncode == 0, f"the SLURM check failed:\n{summary}\n{output[-6000:]}"
    assert "SLURM check passed" in output


def test_the_walltime_modes_faults_hang_one_cell_once_after_a_lead(tmp_path, monkeypatch):
    """The faults of the walltime mode, without SLURM: the grid's second cell hangs on its first attempt only
    (the "once" marker), the first sleeps its lead on every attempt; the lead puts the hung cell's start far
    enough into the job that, ended up to SLURM_KILL_LAG_S after the limit, it has run for under 90 % of it."""
    import json

    from typhoon import _faults
    from typhoon.runner.dask_executor import WALLTIME_SHARE

    sys.path.insert(0, str(REPO / "scripts"))
    import slurm_check

    monkeypatch.setenv("TYPHOON_PROFILES", str(tmp_path / "profiles.toml"))
    (tmp_path / "profiles.toml").write_text(slurm_check.PROFILES)
    walltime = slurm_check.walltime_seconds("00:04:00")
    lead, hang = slurm_check.walltime_faults(tmp_path, walltime)
    first, second = slurm_check.tiny_grid_order(tmp_path)[:2]
    assert (lead["match"], hang["match"]) == (first, second) and hang["seconds"] > walltime
    assert walltime + slurm_check.SLURM_KILL_LAG_S - lead["seconds"] < WALLTIME_SHARE * walltime
    slept = []
    monkeypatch.setattr(_faults.time, "sleep", slept.append)
    monkeypatch.setenv(_faults.ENV, json.dumps([lead, hang]))
    for _ in range(2):  # a first attempt of each cell, then their retries
        _faults.maybe_inject("train", second)
        _faults.maybe_inject("train", first)
        _faults.maybe_inject("train", "runs/mrpc/tiny-random/typhoon/seed0")
    assert slept == [hang["seconds"], lead["seconds"], lead["seconds"]]

