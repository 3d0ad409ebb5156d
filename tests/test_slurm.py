"""A real SLURM: ``scripts/slurm_check.py`` starts a one-node SLURM (Debian's slurm-wlm and munge, on
localhost) and runs the smoke profile's six tiny cells through ``reproduce --cluster slurm`` with one job of a
1-minute walltime at a time and every cell made 30 s longer (the package's fault injection), so that jobs are
surely ended by the walltime mid-cell, whatever the machine's speed; the grid must end with every cell ok and
the local run's table. A job ended by its walltime is lost mid-cell, so this one mode exercises what every
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
def test_smoke_grid_survives_lost_and_ended_slurm_jobs():
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
