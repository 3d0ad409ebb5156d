"""How the grid runner shares the machine among cells and what it hands each cell (fast unit checks; the
end-to-end runs are in test_reproduce)."""

import pytest

from typhoon import machine
from typhoon.config import RunConfig, get_profile, resolve
from typhoon.records import result_rows, run_record
from typhoon.runner import grid, notebooks

CPU_CELL = resolve("cpu", dict(task="mrpc", strategy="random", seed=0))  # num_threads unset


def test_parallel_cpu_cells_share_the_cores(monkeypatch):
    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    assert machine.cell_threads(CPU_CELL, workers=2, gpus=[]) == 1
    assert machine.cell_threads(CPU_CELL, workers=3, gpus=[]) == 1  # never below one thread
    monkeypatch.setattr(machine, "usable_cores", lambda: 16)
    assert machine.cell_threads(CPU_CELL, workers=4, gpus=[]) == 4


def test_cells_keep_their_threads_when_alone_on_gpus_or_set(monkeypatch):
    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    assert machine.cell_threads(CPU_CELL, workers=1, gpus=[]) is None
    assert machine.cell_threads(CPU_CELL, workers=2, gpus=["cuda:0", "cuda:1"]) is None
    assert machine.cell_threads(CPU_CELL.replace(num_threads=2), workers=2, gpus=[]) is None


def test_a_cell_gets_its_resolved_config_whole(tmp_path):
    config = resolve("cpu", dict(task="cola", strategy="typhoon", seed=2), {"p": 0.2, "delta": 1.0})
    params = notebooks.cell_parameters(config, tmp_path, device="cuda:1", threads=1)
    assert set(params) == {"config", "out_dir"} and params["out_dir"] == str(tmp_path)
    received = RunConfig.from_json(params["config"])
    # what the kernel runs is the resolved config, with only the execution fields changed
    assert received == config.replace(device="cuda:1", num_threads=1)
    assert received.identity() == config.identity()
    assert received.p == 0.2 and received.delta == 1.0 and received.ft_epochs == 3  # CoLA: the cpu profile's 3 epochs
    assert RunConfig.from_json(notebooks.cell_parameters(config, tmp_path)["config"]) == config


class _Stop(Exception):
    pass


def _stop_at_the_grid(monkeypatch, seen):
    def fake_grid(configs, out_dir, nb_dir, workers, executor, on_done=None):
        seen.append((configs, workers))
        raise _Stop

    monkeypatch.setattr(grid, "preflight", lambda configs: None)
    monkeypatch.setattr(grid, "run_grid", fake_grid)


def test_reproduce_takes_the_profiles_workers_unless_told(monkeypatch, tmp_path):
    seen = []
    _stop_at_the_grid(monkeypatch, seen)
    monkeypatch.setattr("typhoon.machine.usable_cores", lambda: 4)  # a profile's workers are capped at the cores
    for workers in (None, 3):
        with pytest.raises(_Stop):
            grid.reproduce("cpu", tmp_path, workers=workers, analysis=False)
    assert [w for _, w in seen] == [get_profile("cpu").workers, 3] and seen[0][1] == 2
    assert get_profile("paper").workers == 1  # a profile without the key (paper: GPU cells) runs one cell at a time


def test_reproduce_resolves_overrides_into_every_cell(monkeypatch, tmp_path):
    seen = []
    _stop_at_the_grid(monkeypatch, seen)
    for overrides in (None, {"p": 0.3}):
        with pytest.raises(_Stop):
            grid.reproduce("smoke", tmp_path, overrides=overrides, analysis=False)
    plain, overridden = (configs for configs, _ in seen)
    # profiles.toml's smoke grid: mrpc x tiny-random x 3 strategies x seeds 0-1, and one minilm-l6 cell
    cells = {(c.task, c.backbone, c.strategy, c.seed) for c in overridden}
    assert cells == {("mrpc", "tiny-random", s, seed) for s in ("random", "whole_word", "typhoon") for seed in (0, 1)} \
        | {("mrpc", "minilm-l6", "typhoon", 0)} and len(overridden) == 7
    assert all(c.p == 0.3 and c.max_train_examples == 192 for c in overridden)  # the override, the profile's own
    assert all(c.p == 0.15 for c in plain)  # RunConfig's default rate when nothing overrides it
    assert overridden == [c.replace(p=0.3) for c in plain]  # the override changes p and nothing else


def test_analysis_notebooks_get_the_settings_they_declare(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(grid, "execute_notebook", lambda source, target, params: calls.append((source.name, params)))
    monkeypatch.setattr(grid, "render_report", lambda out_dir, notebooks, profile: out_dir / "report.html")
    grid.run_analysis(tmp_path, tmp_path, get_profile("smoke").analysis)
    assert [name for name, _ in calls] == [nb.name for nb in notebooks.ANALYSIS_NOTEBOOKS] + ["25_reference.ipynb"]
    assert {"00_setup.ipynb", "01_masking_walkthrough.ipynb"} <= set(dict(calls))  # every walkthrough runs
    params = dict(calls)
    assert params["40_mask_schedules.ipynb"] == {"out_dir": str(tmp_path), "quick": True}
    assert params["01_masking_walkthrough.ipynb"] == {"out_dir": str(tmp_path), "quick": True}
    assert params["20_statistics.ipynb"] == {"out_dir": str(tmp_path)}
    calls.clear()
    grid.run_analysis(tmp_path, tmp_path, get_profile("cpu").analysis, "cpu")  # no analysis table: the defaults
    assert dict(calls)["40_mask_schedules.ipynb"] == {"out_dir": str(tmp_path), "profile": "cpu"}
    assert dict(calls)["25_reference.ipynb"] == {"out_dir": str(tmp_path), "profile": "cpu"}  # finds results/cpu


def test_an_unknown_analysis_setting_is_refused_before_anything_is_written(monkeypatch, tmp_path):
    profile = get_profile("smoke")
    profile.analysis = {"quik": True}
    monkeypatch.setattr(grid, "get_profile", lambda name: profile)
    with pytest.raises(ValueError, match=r"unknown analysis setting\(s\) \['quik'\]"):
        grid.reproduce("smoke", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------------
# Reuse of equal runs across profiles


def _tiny_profile(name, strategies, **settings):
    from typhoon.config import Profile

    base = dict(max_train_examples=32, max_eval_examples=32, max_length=32, batch_size=16, eval_batch_size=32,
                mlm_epochs=1, ft_epochs=1, precision="fp32", num_threads=1)
    return Profile(name=name, description=name, tasks=["mrpc"], backbones=["tiny-random"], strategies=strategies,
                   seeds=[0], settings={**base, **settings})


def _in_process_cell(config, out_dir, nb_dir, device=None, threads=None):
    """run_cell without papermill (the same training_run.run the 10_run notebook calls): fast enough for CI."""
    from typhoon.training import run as training_run

    training_run.run(config, out_dir, progress=False)
    return result_rows.status_row(config, "ok")


@pytest.mark.slow  # trains tiny cells in process
def test_a_cell_equal_to_another_profiles_run_reuses_its_record(monkeypatch, tmp_path):
    import json

    first = _tiny_profile("first", ["random", "typhoon"])
    # the second profile sets tau for its softmax cells: its random and min-max cells are still the same runs
    second = _tiny_profile("second", ["random", "typhoon", "typhoon_softmax"], tau=0.5)
    third = _tiny_profile("third", ["random"], ft_lr=1e-3)  # not the same run: trains its own
    table = {p.name: p for p in (first, second, third)}
    monkeypatch.setattr(grid, "get_profile", lambda name: table[name])
    trained = []

    def run_cell(config, *args, **kwargs):
        trained.append((config.profile, config.strategy))
        return _in_process_cell(config, *args, **kwargs)

    monkeypatch.setattr(grid, "run_cell", run_cell)

    grid.reproduce("first", tmp_path / "first", analysis=False)
    assert trained == [("first", "random"), ("first", "typhoon")]
    trained.clear()
    summary = grid.reproduce("second", tmp_path / "second", analysis=False)
    assert trained == [("second", "typhoon_softmax")] and summary.ok  # only the new cell trained
    for strategy in ("random", "typhoon"):
        config = second.grid()[["random", "typhoon"].index(strategy)]
        source, copy = (tmp_path / name / config.relative_dir() for name in ("first", "second"))
        assert run_record.is_complete(copy, config)  # a complete record of the second profile's cell
        metrics = json.loads((copy / "metrics.json").read_text())
        assert metrics["reused_from"]["profile"] == "first" and metrics["reused_from"]["record"].endswith(
            config.relative_dir().as_posix())
        assert metrics["final"] == json.loads((source / "metrics.json").read_text())["final"]
        assert run_record.read_config(copy).profile == "second" and run_record.read_config(copy).tau == 1.0  # what ran
    assert (tmp_path / "second" / second.grid()[1].relative_dir() / "masking_state.npz").is_file()
    results = result_rows.collect_results(tmp_path / "second", second.grid())
    assert list(results["status"]) == ["ok"] * 3 and set(results["profile"]) == {"second"}

    trained.clear()
    grid.reproduce("third", tmp_path / "third", analysis=False, reuse=True)
    assert trained == [("third", "random")]
    trained.clear()  # with reuse off, an equal run trains anyway
    table["fourth"] = _tiny_profile("fourth", ["random"])
    grid.reproduce("fourth", tmp_path / "fourth", analysis=False, reuse=False)
    assert trained == [("fourth", "random")]


def test_analysis_notebooks_run_workers_at_once_and_a_failure_is_raised_after_all(monkeypatch, tmp_path):
    import threading
    import time

    running, most, done = [0], [0], []
    lock = threading.Lock()

    def fake_execute(source, target, params):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
            done.append(source.name)
        if source.name == "20_statistics.ipynb":
            raise RuntimeError("cell failed")

    reported = []
    monkeypatch.setattr(grid, "execute_notebook", fake_execute)
    monkeypatch.setattr(grid, "render_report", lambda out_dir, notebooks, profile: reported.append(notebooks))
    with pytest.raises(RuntimeError, match="cell failed"):
        grid.run_analysis(tmp_path, tmp_path, {}, workers=2)
    assert most[0] == 2 and sorted(done) == sorted(nb.name for nb in notebooks.ANALYSIS_NOTEBOOKS) and not reported
    done.clear()
    monkeypatch.setattr(grid, "ANALYSIS_NOTEBOOKS", tuple(nb for nb in notebooks.ANALYSIS_NOTEBOOKS
                                                          if nb.name != "20_statistics.ipynb"))
    grid.run_analysis(tmp_path, tmp_path, {}, workers=3)
    # in notebook order, the comparison with the reference last (after the statistics when there are any)
    assert reported[0] == [tmp_path / "notebooks" / nb.name for nb in (*grid.ANALYSIS_NOTEBOOKS, notebooks.REFERENCE_NOTEBOOK)]


def test_a_profile_runs_no_more_cells_at_once_than_there_are_usable_cores(monkeypatch):
    monkeypatch.setattr(machine, "gpu_devices", lambda: [])
    assert machine.choose_workers(None, 2, cores=2) == (2, None)
    workers, note = machine.choose_workers(None, 2, cores=1)
    assert workers == 1 and "1 usable core(s)" in note and "instead of the profile's 2" in note
    workers, note = machine.choose_workers(3, 2, cores=2)  # asked for: kept, with a warning
    assert workers == 3 and "share the cores" in note


def test_usable_cores_honour_a_container_quota(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs: rounded up
    assert machine.usable_cores(cpu_max) == min(2, machine.usable_cores(tmp_path / "none"))
    cpu_max.write_text("50000 100000\n")
    assert machine.usable_cores(cpu_max) == 1
    cpu_max.write_text("max 100000\n")
    assert machine.usable_cores(cpu_max) == machine.usable_cores(tmp_path / "none")


def test_a_complete_record_without_its_notebook_is_run_again_unless_it_was_copied(tmp_path):
    """A batch killed after a cell's kernel wrote the record but before its notebook was published: the cell is
    not done (the rerun executes its notebook, which reuses the record); a record copied from another folder is
    done without one (its source may have none); an incomplete record is never done."""
    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 0})
    run_dir = tmp_path / config.relative_dir()
    assert not grid.cell_is_done(config, tmp_path)
    run_record.write_record(run_dir, config, {"status": "failed", "error": "x"})
    assert not grid.cell_is_done(config, tmp_path)
    run_record.write_record(run_dir, config, {"status": "ok"})
    assert run_record.is_complete(run_dir, config) and not grid.cell_is_done(config, tmp_path)
    notebook = notebooks.cell_notebook(config, tmp_path)
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    assert grid.cell_is_done(config, tmp_path)
    notebook.unlink()
    run_record.write_record(run_dir, config, {"status": "ok", "reused_from": {"profile": "cpu", "record": "x"}})
    assert grid.cell_is_done(config, tmp_path)
