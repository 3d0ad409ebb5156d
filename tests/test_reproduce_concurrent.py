"""A second batch on a folder in use, and a grid on a Dask cluster: the smoke grid's cells as other processes
run them. Apart from tests/test_reproduce.py, whose killed-and-resumed smoke run this needs none of, so that `make test`'s
two workers can take the files at once."""

import subprocess
import sys

import pytest
from conftest import REPO

from typhoon.profiles import get_profile
from typhoon.records import locks, run_record
from typhoon.runner.cells import Cell

pytestmark = pytest.mark.slow

GRID = get_profile("smoke").grid()


def test_a_second_reproduce_on_the_same_folder_is_refused(tmp_path):
    """While another process holds the folder's lock -- this test, with the lock a running batch takes
    (``locks.output_folder_lock``), instead of a batch that would train until killed -- ``reproduce`` exits 2."""
    out = tmp_path / "out"
    out.mkdir()
    with locks.output_folder_lock(out):
        second = subprocess.run([sys.executable, "-m", "typhoon", "reproduce", "--profile", "smoke", "--out", str(out)],
                                cwd=REPO, capture_output=True, text=True, timeout=600)
    assert second.returncode == 2, second.stderr[-2000:]
    assert "in use by another process" in second.stderr
    assert not (out / "runs").exists()  # refused before anything was written


def test_grid_on_a_dask_cluster(tmp_path):
    """Real cells on a (local) Dask cluster of worker processes, as many machines would run them: each Dask worker
    trains its cells in a worker process of its own, through the same executor interface as the local pool."""
    import dask
    import distributed

    from typhoon.runner.dask_executor import DaskExecutor
    from typhoon.runner.study import run_cells

    configs = [c for c in GRID if c.backbone == "tiny-random" and c.strategy == "random"]
    with dask.config.set({"distributed.worker.daemon": False}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                     resources={"cell": 1}) as cluster:
        with distributed.Client(cluster) as client:
            cells = run_cells([Cell(c) for c in configs], tmp_path, DaskExecutor(client))
    assert list(cells["status"]) == ["ok", "ok"]
    for config in configs:
        assert run_record.is_complete(tmp_path / config.relative_dir(), config)
