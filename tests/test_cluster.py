"""`reproduce --cluster`: the SLURM job script asks for the resources the profile and the flags give,
and a grid runs through the cluster executor (a Dask LocalCluster here; no SLURM offline)."""

from __future__ import annotations

import threading
import time

import pytest

from typhoon import cli, cluster, grid, records
from typhoon.config import get_profile


def test_job_script_requests_the_profiles_resources():
    spec = cluster.ClusterSpec.from_settings({**get_profile("paper").cluster, "kind": "slurm"},
                                             {"partition": "gpu-a100", "account": "nlp", "memory": None})
    script = cluster.job_script(spec)
    assert "#SBATCH -p gpu-a100" in script and "#SBATCH -A nlp" in script
    assert "#SBATCH --gres=gpu:1" in script  # the [paper.cluster] table: one GPU per job
    assert "#SBATCH --cpus-per-task=8" in script and "#SBATCH -t 04:00:00" in script
    assert "#SBATCH --mem=30G" in script  # 32GB as SLURM counts it (dask-jobqueue writes GiB)
    assert "--resources cell=1" in script  # one cell per job at a time
    assert f"cd {cluster.REPO}" in script and "export OMP_NUM_THREADS=8" in script


def test_flags_override_the_profile_and_no_gpu_means_no_gres():
    spec = cluster.ClusterSpec.from_settings({"gpus": 2, "walltime": "01:00:00"}, {"gpus": 0, "cpus": 2,
                                                                                    "walltime": "00:30:00"})
    script = cluster.job_script(spec)
    assert "--gres" not in script and "#SBATCH -t 00:30:00" in script and "#SBATCH --cpus-per-task=2" in script


@pytest.mark.parametrize("table, message", [({"gpu": 1}, "unknown cluster setting"), ({"jobs": 0}, "jobs must be"),
                                            ({"kind": "pbs"}, "kind must be"), ({"prologue": "cd x"}, "prologue")])
def test_bad_cluster_settings_are_named(table, message):
    with pytest.raises(ValueError, match=message):
        cluster.ClusterSpec.from_settings(table)


def test_cli_prints_the_job_script(capsys):
    assert cli.main(["reproduce", "--profile", "paper", "--cluster", "slurm", "--job-script", "--jobs", "3",
                     "--partition", "short"]) == 0
    assert "#SBATCH -p short" in capsys.readouterr().out


# The fake cell runner lives at module level: Dask pickles what it runs (by reference, so the in-process
# workers of the LocalCluster share this module's state).
RAN: list[tuple[str, object, int | None]] = []
RUNNING = {"now": 0, "most": 0}
LOCK = threading.Lock()


def fake_run_cell(config, out_dir, nb_dir, device=None, threads=None):
    from distributed import get_worker

    with LOCK:
        RUNNING["now"] += 1
        RUNNING["most"] = max(RUNNING["most"], RUNNING["now"])
    time.sleep(0.2)
    with LOCK:
        RUNNING["now"] -= 1
        RAN.append((config.relative_dir().as_posix(), get_worker().name, threads))
    return records.status_row(config, "ok", seconds=0.2)


def test_a_grid_runs_through_the_cluster_executor_one_cell_per_worker(tmp_path, monkeypatch):
    """The same code path as SLURM (cluster_executor -> run_grid), on a LocalCluster of two workers, with a
    fake cell runner that records which Dask worker ran it and how many cells ran at once."""
    configs = get_profile("smoke").grid()[:4]
    RAN.clear()
    monkeypatch.setattr(grid, "run_cell", fake_run_cell)
    spec = cluster.ClusterSpec(kind="local", jobs=2)
    with cluster.cluster_executor(spec) as executor:
        cells = grid.run_grid(configs, tmp_path, grid.notebooks_dir(), workers=1, executor=executor)
    assert list(cells["status"]) == ["ok"] * 4
    assert sorted(path for path, _, _ in RAN) == sorted(c.relative_dir().as_posix() for c in configs)
    assert {worker for _, worker, _ in RAN} == {0, 1}  # both workers took cells
    assert RUNNING["most"] <= 2  # one cell per worker at a time
    assert all(threads is None for _, _, threads in RAN)  # threads: the cell's own setting on its node


def test_cli_cluster_hands_reproduce_the_cluster_executor(monkeypatch, tmp_path, capsys):
    seen = {}

    class Done:
        ok = True

    def fake_reproduce(profile, out, **kwargs):
        seen.update(profile=profile, out=out, **kwargs)
        future = kwargs["executor"].submit(sum, [1, 2])  # the executor runs work on the cluster's worker
        seen["result"] = future.result(timeout=30)
        return Done()

    monkeypatch.setattr(grid, "reproduce", fake_reproduce)
    assert cli.main(["reproduce", "--profile", "smoke", "--out", str(tmp_path), "--cluster", "local", "--jobs", "1",
                     "--no-analysis"]) == 0
    assert seen["profile"] == "smoke" and seen["workers"] == 1 and seen["estimate"] is False
    assert seen["analysis"] is False and seen["result"] == 3
    assert "local cluster: 1 job(s)" in capsys.readouterr().out
    with pytest.raises(ValueError, match="not both"):
        cli.reproduce_on_cluster(cli.build_parser().parse_args(
            ["reproduce", "--cluster", "local", "--scheduler", "tcp://x:1"]), {})
