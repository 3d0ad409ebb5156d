"""`reproduce --cluster`: the SLURM job script asks for the resources the profile and the flags give,
and a study's cells run through the Dask executor (a Dask LocalCluster here; no SLURM offline)."""

from __future__ import annotations

import contextlib
import os
import threading
import time

import pytest

import typhoon.studies.profile_study as reproducing
from typhoon import cli
from typhoon.profiles import get_profile
from typhoon.records import result_rows, run_record
from typhoon.runner import cluster, dask_executor, progress, stop, study
from typhoon.runner.cells import Cell, remove_cell_leftovers
from typhoon.runner.executor_options import parse_scheduler_options
from typhoon.training import progress_file


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


def test_cli_prints_the_job_script_with_its_logs_under_the_output_folder(capsys, tmp_path):
    assert cli.main(["reproduce", "--profile", "paper", "--cluster", "slurm", "--job-script", "--jobs", "3",
                     "--partition", "short", "--out", str(tmp_path / "run")]) == 0
    script = capsys.readouterr().out
    assert "#SBATCH -p short" in script
    logs = tmp_path / "run" / "logs" / "slurm"
    assert f"#SBATCH -o {logs}/" in script and f"#SBATCH -e {logs}/" in script  # never the working folder


@pytest.mark.parametrize("walltime, seconds", [("90", 90 * 60), ("5:30", 330), ("02:00:00", 7200),
                                               ("1-12", 36 * 3600), ("1-12:30", 36 * 3600 + 1800),
                                               ("2-00:00:10", 48 * 3600 + 10)])
def test_walltime_is_read_as_sbatch_reads_it(walltime, seconds):
    assert cluster.walltime_seconds(walltime) == seconds


@pytest.mark.parametrize("walltime", ["two hours", "1:2:3:4", "-5", "1-"])
def test_a_walltime_sbatch_would_refuse_is_refused_by_name(walltime):
    with pytest.raises(ValueError, match=f"walltime must be a SLURM time limit .* got '{walltime}'"):
        cluster.ClusterSpec(walltime=walltime)


# The fake cell runner lives at module level: Dask pickles what it runs (by reference, so the in-process
# workers of the LocalCluster share this module's state).
RAN: list[tuple[str, object, int | None]] = []
RUNNING = {"now": 0, "most": 0}
LOCK = threading.Lock()


def fake_run_cell(cell, out_dir):
    from distributed import get_worker

    config = cell.config
    with LOCK:
        RUNNING["now"] += 1
        RUNNING["most"] = max(RUNNING["most"], RUNNING["now"])
    time.sleep(0.2)
    with LOCK:
        RUNNING["now"] -= 1
        RAN.append((config.relative_dir().as_posix(), get_worker().name, config.num_threads))
    return result_rows.status_row(config, "ok", seconds=0.2)


def test_a_grid_runs_through_the_cluster_executor_one_cell_per_worker(tmp_path):
    """The same code path as SLURM (cluster_executor -> the study loop's run_cells), on a LocalCluster of two
    workers, with a fake cell that records which Dask worker ran it and how many cells ran at once."""
    configs = get_profile("smoke").grid()[:4]
    RAN.clear()
    spec = cluster.ClusterSpec(kind="local", jobs=2)
    with cluster.cluster_executor(spec, cell_fn=fake_run_cell) as executor:
        cells = study.run_cells([Cell(c) for c in configs], tmp_path, executor)
    assert list(cells["status"]) == ["ok"] * 4
    assert sorted(path for path, _, _ in RAN) == sorted(c.relative_dir().as_posix() for c in configs)
    assert {worker for _, worker, _ in RAN} == {0, 1}  # both workers took cells
    assert RUNNING["most"] <= 2  # one cell per worker at a time
    assert sorted(threads or 0 for _, _, threads in RAN) == sorted(c.num_threads or 0 for c in configs)  # the cell's own setting on its node


def test_cli_cluster_hands_reproduce_the_cluster_executor(monkeypatch, tmp_path, capsys):
    seen = {}

    class Done:
        ok = True

    def fake_reproduce(profile, out, **kwargs):
        seen.update(profile=profile, out=out, **kwargs)
        executor = kwargs["executor"]
        executor.cell_fn = fake_run_cell  # the executor runs a cell on the cluster's worker ...
        config = get_profile("smoke").grid()[0]
        executor.submit(Cell(config), out)
        deadline, rows = time.monotonic() + 30, []
        while not rows and time.monotonic() < deadline:
            rows = executor.poll(0.1)  # ... handed to it by the poll (the study loop calls it)
        seen["rows"] = rows
        return Done()

    monkeypatch.setattr(reproducing, "reproduce", fake_reproduce)
    assert cli.main(["reproduce", "--profile", "smoke", "--out", str(tmp_path), "--cluster", "local", "--jobs", "1",
                     "--no-analysis"]) == 0
    assert seen["profile"] == "smoke" and seen["workers"] == 1 and seen["estimate"] is False
    assert seen["analysis"] is False and [row["status"] for row in seen["rows"]] == ["ok"]
    assert "local cluster: 1 job(s)" in capsys.readouterr().out
    capsys.readouterr()
    assert cli.main(["reproduce", "--profile", "smoke", "--out", str(tmp_path / "new"), "--cluster", "local",
                     "--scheduler", "tcp://x:1"]) == 2
    assert "give --cluster or --scheduler, not both" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


# --- jobs that end: replaced, their cells retried then recorded failed, their leftovers removed -----------

DOOMED = "runs/mrpc/tiny-random/random/seed0"  # the cell whose worker the test keeps losing
ATTEMPTS: list[str] = []  # the worker addresses the doomed cell started on


def staging_folder(config, out_dir):
    run_dir = out_dir / config.relative_dir()
    return run_dir.with_name(f".{run_dir.name}.tmp-{os.getpid()}-{len(ATTEMPTS)}")


def losing_cell(cell, out_dir):
    """A cell that stages its record like a run; the doomed cell then runs until its worker is lost."""
    config = cell.config
    from distributed import get_worker
    from distributed.core import Status

    worker = get_worker()
    temp = staging_folder(config, out_dir)
    temp.mkdir(parents=True)
    if config.relative_dir().as_posix() == DOOMED:
        ATTEMPTS.append(worker.address)
        while worker.status == Status.running:  # until the test removes this worker, as a job's end would
            time.sleep(0.05)
        return result_rows.status_row(config, "ok")  # never reaches the grid: the worker is gone
    time.sleep(0.2)
    temp.rmdir()
    return result_rows.status_row(config, "ok", seconds=0.2)


async def lose_worker(address, dask_scheduler=None):
    """What the scheduler does when a worker's job ends: the worker is gone, unexpectedly."""
    await dask_scheduler.remove_worker(address, stimulus_id="test-job-ended", expected=False, close=True)


def test_a_lost_cell_is_retried_then_recorded_failed_and_its_jobs_replaced(tmp_path):
    configs = get_profile("smoke").grid()[:3]
    ATTEMPTS.clear()
    spec = cluster.ClusterSpec(kind="local", jobs=2, retries=1)
    seen_leftovers = []
    with cluster.cluster_executor(spec, cell_fn=losing_cell) as executor:
        executor.check_s = 0.2

        def job_killer():  # loses the doomed cell's worker on each attempt, once it has written its temp notebook
            for attempt in range(spec.retries + 1):
                deadline = time.monotonic() + 60
                while len(ATTEMPTS) <= attempt and time.monotonic() < deadline:
                    time.sleep(0.05)
                seen_leftovers.append(len(list((tmp_path / "runs").rglob(".seed0.tmp-*"))))
                executor.client.run_on_scheduler(lose_worker, ATTEMPTS[attempt])

        killer = threading.Thread(target=job_killer, daemon=True)
        killer.start()
        cells = study.run_cells([Cell(c) for c in configs], tmp_path, executor)
        killer.join(timeout=30)
        deadline = time.monotonic() + 30
        while len(executor.client.scheduler_info()["workers"]) < spec.jobs and time.monotonic() < deadline:
            executor.look_after()
            time.sleep(0.2)
        workers_after = len(executor.client.scheduler_info()["workers"])
    rows = cells.set_index("record_path")
    assert len(ATTEMPTS) == spec.retries + 1 and len(set(ATTEMPTS)) == spec.retries + 1  # a new worker each time
    assert rows.loc[DOOMED, "status"] == "failed"
    assert "LostWorker" in rows.loc[DOOMED, "error"] and ATTEMPTS[-1] in rows.loc[DOOMED, "error"]
    assert (rows.drop(DOOMED)["status"] == "ok").all()
    record = run_record.read_json(tmp_path / DOOMED / "metrics.json")
    assert record["status"] == "failed" and ATTEMPTS[-1] in record["error"]
    assert seen_leftovers == [1] * (spec.retries + 1)  # each attempt's staging folder was there when it was lost ...
    assert not list(tmp_path.rglob("*.tmp-*"))  # ... and none is left
    assert workers_after == spec.jobs  # the lost workers were replaced


def test_lost_cell_leftovers_are_removed_and_nothing_else(tmp_path):
    lost, other = get_profile("smoke").grid()[:2]
    made = []
    for config in (lost, other):
        run_dir = tmp_path / config.relative_dir()
        for path in (progress_file.progress_path(run_dir), run_dir.with_name(f".{run_dir.name}.lock")):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
            made.append(path)
        staging = run_dir.with_name(f".{run_dir.name}.tmp-123-abcd")
        (staging / "sub").mkdir(parents=True)
        resume_tmp = run_dir.with_name(f".{run_record.resume_state_path(run_dir).name}.tmp-123-abcd")
        resume_tmp.write_bytes(b"sta")  # a resume state the lost job was saving
        made += [staging, resume_tmp]
    lost_state = run_record.resume_state_path(tmp_path / lost.relative_dir())
    lost_state.write_bytes(b"state")  # the lost cell's resume state: its next run goes on from it
    run_record.write_record(tmp_path / other.relative_dir(), other, {"status": "ok"})
    remove_cell_leftovers(lost, tmp_path)
    assert [p.exists() for p in made] == [False] * 4 + [True] * 4  # the lost cell's gone, the other's kept
    assert lost_state.exists()
    assert run_record.record_status(tmp_path / other.relative_dir(), other) == "ok"


class FakeClient:
    """What DaskExecutor asks a Dask client: which worker runs what."""

    def __init__(self):
        self.workers: dict[str, tuple] = {}

    def processing(self):
        return dict(self.workers)

    def scheduler_info(self, n_workers=-1):
        return {"workers": {address: {"name": i} for i, address in enumerate(self.workers)}}

    def submit(self, *args, **kwargs):
        class Task:  # runs for ever
            def add_done_callback(self, callback):
                pass

        return Task()


def test_no_worker_for_the_timeout_stops_the_grid_with_a_message(tmp_path):
    now = [0.0]
    client = FakeClient()
    executor = dask_executor.DaskExecutor(client, no_worker_timeout_s=60, check_s=0, clock=lambda: now[0])
    executor.submit(Cell(get_profile("smoke").grid()[0]), tmp_path)  # a cell remains
    for t in (10, 59):
        now[0] = t
        executor.poll()  # no worker yet, but not for 60 s
    client.workers = {"tcp://127.0.0.1:1": ()}
    now[0] = 100
    executor.poll()  # a worker: the clock starts again when it goes
    client.workers = {}
    for t in (101, 150):
        now[0] = t
        executor.poll()
    now[0] = 161
    with pytest.raises(dask_executor.NoWorkersError, match=r"no Dask worker has been alive for 60 s while 1 cell"):
        executor.poll()
    executor.cells[0].row = {"status": "ok"}  # the cell finished
    now[0] = 1000
    executor.poll()  # no cell remains: no worker is needed


def test_no_worker_timeout_exits_2_from_the_cli(monkeypatch, capsys):
    def no_workers(*args, **kwargs):
        raise dask_executor.NoWorkersError("no Dask worker has been alive for 5 s while 7 cell(s) remain")

    monkeypatch.setattr(reproducing, "reproduce", no_workers)
    assert cli.main(["reproduce", "--profile", "smoke", "--cluster", "local", "--jobs", "1",
                     "--no-worker-timeout", "5"]) == 2
    assert "no Dask worker has been alive for 5 s" in capsys.readouterr().err


def test_interface_and_scheduler_options_from_the_profile_and_the_flags():
    table = {"interface": "ib0", "scheduler_options": {"port": 8786, "dashboard_address": ":8787"}, "retries": 4}
    spec = cluster.ClusterSpec.from_settings(table, {"interface": "lo", "scheduler_options": {"port": 0}})
    assert spec.interface == "lo" and spec.retries == 4 and spec.no_worker_timeout_s == 3600
    assert spec.scheduler_options == {"port": 0, "dashboard_address": ":8787"}  # the flag's port, the table's rest
    args = cli.build_parser().parse_args(["reproduce", "--profile", "paper", "--cluster", "slurm", "--interface", "lo",
                                          "--scheduler-option", "port=0", "--scheduler-option",
                                          "dashboard_address=none", "--retries", "1", "--no-worker-timeout", "30"])
    assert parse_scheduler_options(args.scheduler_option) == {"port": 0, "dashboard_address": None}
    assert (args.interface, args.retries, args.no_worker_timeout_s) == ("lo", 1, 30.0)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_scheduler_options(["port"])
    for bad, message in (({"retries": -1}, "retries"), ({"no_worker_timeout_s": 0}, "no_worker_timeout_s"),
                         ({"scheduler_options": "port=1"}, "scheduler_options"), ({"interface": ""}, "interface")):
        with pytest.raises(ValueError, match=message):
            cluster.ClusterSpec.from_settings(bad)


def test_the_slurm_scheduler_and_workers_listen_on_the_interface_given():
    spec = cluster.ClusterSpec.from_settings({"kind": "slurm", "interface": "lo",
                                              "scheduler_options": {"dashboard_address": "127.0.0.1:0"}})
    made = cluster.slurm_cluster(spec)
    try:
        assert made.scheduler_address.startswith("tcp://127.0.0.1:")
        assert "--interface lo" in made.job_script()  # the workers, on their nodes
    finally:
        made.close()


def test_cli_flags_reach_the_cluster(monkeypatch, capsys):
    specs = []

    @contextlib.contextmanager
    def fake_executor(spec):
        specs.append(spec)
        yield None

    class Done:
        ok = True

    monkeypatch.setattr(cluster, "cluster_executor", fake_executor)
    monkeypatch.setattr(reproducing, "reproduce", lambda *a, **k: Done())
    assert cli.main(["reproduce", "--profile", "smoke", "--cluster", "local", "--interface", "lo", "--retries", "0",
                     "--scheduler-option", "port=0", "--no-worker-timeout", "9"]) == 0
    assert (specs[0].interface, specs[0].retries, specs[0].no_worker_timeout_s) == ("lo", 0, 9.0)
    assert specs[0].scheduler_options == {"port": 0}


STOPPED_ON: list[str] = []


def record_stop(dask_worker=None):  # module level: Dask pickles it by reference, so the in-process workers append here
    STOPPED_ON.append(dask_worker.address)
    return []


def slow_cell(cell, out_dir):
    time.sleep(4.0)
    return result_rows.status_row(cell.config, "ok")


def test_a_stop_cancels_the_cells_and_kills_the_workers_processes(tmp_path, monkeypatch):
    """Ctrl-C mid-grid: every worker runs the stop helper (its worker process is killed) and no cell is left
    running."""
    STOPPED_ON.clear()
    monkeypatch.setattr(stop, "stop_worker_cells", record_stop)
    configs = get_profile("smoke").grid()[:2]
    with cluster.cluster_executor(cluster.ClusterSpec(kind="local", jobs=2), cell_fn=slow_cell) as executor:
        cells = [Cell(c) for c in configs]
        monitor = progress.GridMonitor(tmp_path, cells, 0)
        polls = []

        def ctrl_c_once_cells_run():
            polls.append(1)
            if len(polls) > 1 and all(cell.task is not None for cell in executor.cells):
                raise KeyboardInterrupt

        monkeypatch.setattr(monitor, "poll", ctrl_c_once_cells_run)
        try:
            with pytest.raises(KeyboardInterrupt):
                study.run_cells(cells, tmp_path, executor, monitor=monitor)
        finally:
            stop.clear_stop()
        assert sorted(STOPPED_ON) == sorted(executor.alive) and len(STOPPED_ON) == 2  # each worker was told
        assert all(cell.task.cancelled() for cell in executor.cells)  # no cell left running
        assert executor.pending() == 0


def lost_at(out_dir, walltime_s, worker_seen, cell_started, lost, retries=2):
    """A cell handed to a worker at ``cell_started`` on a worker first seen at ``worker_seen``, the worker
    gone at ``lost``: the executor's view of it (the cell, what it said, whether the cell waits again)."""
    now = [worker_seen]
    said, client = [], FakeClient()
    executor = dask_executor.DaskExecutor(client, retries=retries, check_s=0, clock=lambda: now[0], say=said.append,
                                          walltime_s=walltime_s)
    client.workers = {"tcp://127.0.0.1:1": ()}
    executor.poll()  # the worker is seen
    now[0] = cell_started
    executor.submit(Cell(get_profile("smoke").grid()[0]), out_dir)
    executor.poll()  # handed to it
    now[0] = lost
    client.workers = {}
    executor.poll()
    return executor.cells[0], said, bool(executor.waiting)


def test_a_cell_that_outlasts_a_whole_walltime_fails_at_once_with_the_fix(tmp_path):
    cell, said, waits = lost_at(tmp_path, 3600, worker_seen=0, cell_started=5, lost=3590)
    assert not waits and cell.row["status"] == "failed"
    message = cell.row["error"]
    assert "reached its walltime (60.0 min) with the cell running for 59.8 min" in message
    assert "raise the walltime" in message and "--cpus" in message and "retries" not in message
    assert said and "it fails" in said[-1]
    assert run_record.read_json(tmp_path / cell.cell.path / "metrics.json")["status"] == "failed"


def test_a_cell_started_late_in_its_job_runs_again_when_the_walltime_ends_the_job(tmp_path):
    cell, said, waits = lost_at(tmp_path, 3600, worker_seen=0, cell_started=3000, lost=3590)
    assert waits and cell.row is None
    assert "its job reached its walltime (60.0 min) 9.8 min into the cell; it runs again" in said[-1]


def test_a_worker_lost_long_before_its_walltime_is_not_blamed_on_it(tmp_path):
    cell, said, waits = lost_at(tmp_path, 3600, worker_seen=0, cell_started=5, lost=600)
    assert waits and "walltime" not in said[-1]
