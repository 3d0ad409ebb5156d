"""How the study loop shares the machine among cells and what it hands each cell (fast unit checks; the
end-to-end runs are in test_reproduce and test_workers)."""

import pickle

import pandas as pd
import pytest
from inline_executor import InlineExecutor

from typhoon import machine
from typhoon.config import RunConfig
from typhoon.profiles import get_profile, resolve
from typhoon.records import result_rows, run_record
from typhoon.runner import notebooks, study, workers
from typhoon.runner.cells import Cell, cell_is_done
from typhoon.runner.progress import RunLog
from typhoon.runner.workers import Slot, slots_for
from typhoon.studies import profile_study
from typhoon.studies.grid import analysis as grid_analysis
from typhoon.studies.grid import policy as grid
from typhoon.studies.grid.pages import PAGES as GRID_PAGES
from typhoon.studies.profile_study import reproduce

CPU_CELL = resolve("cpu", dict(task="mrpc", strategy="random", seed=0))  # num_threads unset


def test_parallel_cpu_cells_share_the_cores(monkeypatch):
    monkeypatch.setattr(machine, "usable_cores", lambda: 2)
    assert slots_for(2, []) == [Slot(None, 1)] * 2
    assert slots_for(3, []) == [Slot(None, 1)] * 3  # never below one thread
    assert slots_for(1, []) == [Slot(None, None)]  # alone: the cell's own setting (all cores)
    monkeypatch.setattr(machine, "usable_cores", lambda: 16)
    assert slots_for(4, []) == [Slot(None, 4)] * 4
    # on GPUs the devices are taken in turn, and the host's cores shared out all the same
    assert slots_for(4, ["cuda:0", "cuda:1"]) == [Slot("cuda:0", 4), Slot("cuda:1", 4)] * 2


def test_a_slot_changes_only_where_a_cell_runs(monkeypatch):
    config = resolve("cpu", dict(task="cola", strategy="typhoon", seed=2), {"p": 0.2, "delta": 1.0})
    received = pickle.loads(pickle.dumps(Slot("cuda:1", 1).apply(Cell(config)))).config  # as it travels to its worker
    # what the worker runs is the resolved config, with only the execution fields changed
    assert received == config.replace(device="cuda:1", num_threads=1)
    assert received.identity() == config.identity()
    assert received.p == 0.2 and received.delta == 1.0 and received.ft_epochs == 3  # CoLA: the cpu profile's 3 epochs
    assert Slot().apply(Cell(config)).config == config
    assert Slot(None, 1).apply(Cell(config.replace(num_threads=2))).config.num_threads == 2  # a cell's own setting is kept


class _Stop(Exception):
    pass


def _stop_at_the_cells(monkeypatch, seen):
    """reproduce up to its first look: which workers it chose and which cells it would run."""
    def fake_run_cells(cells, out_dir, executor, on_done=None, monitor=None, skipped=0):
        seen.append(([cell.config for cell in cells], executor.workers))
        raise _Stop

    monkeypatch.setattr(grid, "preflight", lambda configs: None)
    monkeypatch.setattr(study, "local_pool", lambda workers: type("Pool", (InlineExecutor,), {"workers": workers})())
    monkeypatch.setattr(study, "run_cells", fake_run_cells)


def test_reproduce_takes_the_profiles_workers_unless_told(monkeypatch, tmp_path):
    seen = []
    _stop_at_the_cells(monkeypatch, seen)
    monkeypatch.setattr(machine, "gpu_devices", lambda: [])
    monkeypatch.setattr(machine, "usable_cores", lambda: 4)  # a profile's workers are capped at the cores
    for workers_asked in (None, 3):
        with pytest.raises(_Stop):
            reproduce("cpu", tmp_path, workers=workers_asked, analysis=False)
    assert [w for _, w in seen] == [get_profile("cpu").workers, 3] and seen[0][1] == 2
    assert get_profile("paper").workers == 1  # a profile without the key (paper: GPU cells) runs one cell at a time


def test_reproduce_parses_set_once_and_resolves_it_into_every_cell_once(monkeypatch, tmp_path):
    from typhoon import cli, cli_checks, config, profiles

    seen, calls = [], {"parse_overrides": 0, "grid": 0}
    _stop_at_the_cells(monkeypatch, seen)

    def counted(name, function):
        def call(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(cli_checks, "parse_overrides", counted("parse_overrides", config.parse_overrides))
    monkeypatch.setattr(profiles.Profile, "grid", counted("grid", profiles.Profile.grid))
    for given in ([], ["--set", "p=0.3"]):
        with pytest.raises(_Stop):
            cli.main(["reproduce", "--profile", "smoke", "--out", str(tmp_path / "out"), "--no-analysis",
                      "--no-estimate", *given])
    assert calls == {"parse_overrides": 2, "grid": 2}  # once each per command: the cells run as check_input made them
    plain, overridden = (configs for configs, _ in seen)
    # profiles.toml's smoke grid: mrpc x tiny-random x 3 strategies x seeds 0-1, and one minilm-l6 cell
    cells = {(c.task, c.backbone, c.strategy, c.seed) for c in overridden}
    assert cells == {("mrpc", "tiny-random", s, seed) for s in ("random", "whole_word", "typhoon") for seed in (0, 1)} \
        | {("mrpc", "minilm-l6", "typhoon", 0)} and len(overridden) == 7
    assert all(c.p == 0.3 and c.max_train_examples == 192 for c in overridden)  # the override, the profile's own
    assert all(c.p == 0.15 for c in plain)  # RunConfig's default rate when nothing overrides it
    assert overridden == [c.replace(p=0.3) for c in plain]  # the override changes p and nothing else


def test_on_gpus_the_workers_fit_the_free_memory_and_the_host_cores(monkeypatch):
    monkeypatch.setattr(machine, "gpu_devices", lambda: ["cuda:0", "cuda:1"])
    monkeypatch.setattr(machine, "gpu_free_memory_gib", lambda: [80.0, 60.0])
    monkeypatch.setattr(machine, "usable_cores", lambda: 17)
    monkeypatch.setattr("typhoon.runner.cell_work.cell_memory_gib", lambda config, shape: 7.0)
    configs = get_profile("smoke").grid()[:2]
    # the emptiest device holds 60 // 7 = 8 cells; 16 cores (one kept for the batch) feed 8 per device
    assert workers.choose_workers(None, 1, configs)[0] == 16
    monkeypatch.setattr(machine, "usable_cores", lambda: 9)  # 8 cores: 4 per device
    count, note = workers.choose_workers(None, 1, configs)
    assert count == 8 and "4 cell(s) at once on each" in note and "--workers" in note
    count, note = workers.choose_workers(40, 1, configs)  # more than the devices hold: lowered, said
    assert count == 16 and "--workers 40" in note and "at most 16" in note
    assert workers.choose_workers(5, 1, configs) == (5, None)
    monkeypatch.setattr(machine, "gpu_free_memory_gib", lambda: [80.0, 3.0])
    with pytest.raises(ValueError, match=r"needs about 7.0 GiB of GPU memory and the emptiest device has 3.0 GiB"):
        workers.choose_workers(None, 1, configs)


def test_analysis_notebooks_get_the_settings_they_declare(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(grid_analysis, "execute_for", lambda out_dir, nb_dir, name, params, target=None:
                        calls.append((target or name, params)) or out_dir / "notebooks" / (target or name))
    monkeypatch.setattr(grid_analysis, "render_report", lambda out_dir, notebooks, profile, failed, pages: out_dir / "report.html")
    smoke = get_profile("smoke")
    grid_analysis.run_analysis(tmp_path, tmp_path, smoke.analysis, configs=smoke.grid())
    pairs = ["10_walkthrough-mrpc-tiny-random.ipynb", "10_walkthrough-mrpc-minilm-l6.ipynb"]
    assert [name for name, _ in calls] == pairs + [nb.name for nb in notebooks.ANALYSIS_NOTEBOOKS] + ["25_reference.ipynb"]
    params = dict(calls)
    assert params[pairs[0]] == {"out_dir": str(tmp_path), "task": "mrpc", "backbone": "tiny-random",
                                "train_missing": False}  # one walkthrough per backbone x task, training nothing
    assert params["40_mask_schedules.ipynb"] == {"out_dir": str(tmp_path), "quick": True}
    assert params["01_masking_walkthrough.ipynb"] == {"out_dir": str(tmp_path), "quick": True}
    assert params["20_statistics.ipynb"] == {"out_dir": str(tmp_path)}
    calls.clear()
    grid_analysis.run_analysis(tmp_path, tmp_path, get_profile("cpu").analysis, "cpu")  # no analysis table: the defaults
    assert dict(calls)["40_mask_schedules.ipynb"] == {"out_dir": str(tmp_path), "profile": "cpu"}
    assert dict(calls)["25_reference.ipynb"] == {"out_dir": str(tmp_path), "profile": "cpu"}  # finds results/cpu


def test_an_unknown_analysis_setting_is_refused_before_anything_is_written(monkeypatch, tmp_path):
    profile = get_profile("smoke")
    profile.analysis = {"quik": True}
    monkeypatch.setattr(profile_study, "get_profile", lambda name: profile)
    with pytest.raises(ValueError, match=r"unknown analysis setting\(s\) \['quik'\]"):
        reproduce("smoke", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------------
# Reuse of equal runs across profiles


def _tiny_profile(name, strategies, **settings):
    from typhoon.profiles import Profile

    base = dict(max_train_examples=32, max_eval_examples=32, max_length=32, batch_size=16, eval_batch_size=32,
                mlm_epochs=1, ft_epochs=1, precision="fp32", num_threads=1)
    return Profile(name=name, description=name, tasks=["mrpc"], backbones=["tiny-random"], strategies=strategies,
                   seeds=[0], settings={**base, **settings})


@pytest.mark.slow  # trains tiny cells in process
def test_a_cell_equal_to_another_profiles_run_reuses_its_record(monkeypatch, tmp_path):
    import json

    first = _tiny_profile("first", ["random", "typhoon"])
    # the second profile sets tau for its softmax cells: its random and min-max cells are still the same runs
    second = _tiny_profile("second", ["random", "typhoon", "typhoon_softmax"], tau=0.5)
    third = _tiny_profile("third", ["random"], ft_lr=1e-3)  # not the same run: trains its own
    table = {p.name: p for p in (first, second, third)}
    monkeypatch.setattr(profile_study, "get_profile", lambda name: table[name])
    executor = InlineExecutor()  # the cells in this process: fast enough for CI

    def trained():
        ran = [(c.profile, c.strategy) for c in executor.ran]
        executor.ran.clear()
        return ran

    reproduce("first", tmp_path / "first", analysis=False, executor=executor)
    assert trained() == [("first", "random"), ("first", "typhoon")]
    summary = reproduce("second", tmp_path / "second", analysis=False, executor=executor)
    assert trained() == [("second", "typhoon_softmax")] and summary.ok  # only the new cell trained
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

    reproduce("third", tmp_path / "third", analysis=False, reuse=True, executor=executor)
    assert trained() == [("third", "random")]
    table["fourth"] = _tiny_profile("fourth", ["random"])  # with reuse off, an equal run trains anyway
    reproduce("fourth", tmp_path / "fourth", analysis=False, reuse=False, executor=executor)
    assert trained() == [("fourth", "random")]


def test_analysis_notebooks_run_two_at_once_and_a_failure_is_raised_after_all(monkeypatch, tmp_path):
    import threading
    import time

    running, most, done = [0], [0], []
    lock = threading.Lock()

    def fake_execute(out_dir, nb_dir, name, params, target=None):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.1)
        with lock:
            running[0] -= 1
            done.append(name)
        executed = out_dir / "notebooks" / (target or name)
        executed.parent.mkdir(exist_ok=True)
        executed.touch()
        if name == "20_statistics.ipynb":
            raise notebooks.NotebookFailed(executed, "In [3]", "KeyError", "'delta'")
        if name == "40_mask_schedules.ipynb":
            raise RuntimeError("no notebook's error")
        return executed

    reported = []
    monkeypatch.setattr(grid_analysis, "execute_for", fake_execute)
    monkeypatch.setattr(grid_analysis, "render_report", lambda out_dir, notebooks, profile, failed, pages:
                        reported.append((notebooks, failed)) or out_dir / "report.html")
    with pytest.raises(RuntimeError, match="no notebook's error"):  # raised as it was, after all finished
        grid_analysis.run_analysis(tmp_path, tmp_path, {}, workers=2)
    assert most[0] == 2 and sorted(done) == sorted(nb.name for nb in notebooks.ANALYSIS_NOTEBOOKS) and not reported
    done.clear()
    monkeypatch.setattr(grid_analysis, "ANALYSIS_NOTEBOOKS", tuple(nb for nb in notebooks.ANALYSIS_NOTEBOOKS
                                                          if nb.name != "40_mask_schedules.ipynb"))
    with pytest.raises(grid.AnalysisFailed) as failed:  # a notebook that raised: the others and the report kept
        grid_analysis.run_analysis(tmp_path, tmp_path, {}, workers=2)
    said = "notebooks/20_statistics.ipynb, cell In [3]: KeyError: 'delta'"
    assert str(failed.value) == said and failed.value.report == tmp_path / "report.html"
    shown = ["00_setup.ipynb", "01_masking_walkthrough.ipynb", "20_statistics.ipynb", "25_reference.ipynb",
             "30_budget_spread.ipynb"]  # the failed one too: its copy shows the traceback at that cell
    assert reported[-1] == ([tmp_path / "notebooks" / name for name in shown], [said])
    reported.clear()
    done.clear()
    monkeypatch.setattr(grid_analysis, "ANALYSIS_NOTEBOOKS", tuple(nb for nb in notebooks.ANALYSIS_NOTEBOOKS
                                                          if nb.name not in ("20_statistics.ipynb", "40_mask_schedules.ipynb")))
    grid_analysis.run_analysis(tmp_path, tmp_path, {}, workers=3)
    # in notebook order, the comparison with the reference last (after the statistics when there are any)
    assert reported[0] == ([tmp_path / "notebooks" / nb.name for nb in (*grid_analysis.ANALYSIS_NOTEBOOKS, notebooks.REFERENCE_NOTEBOOK)],
                           [])


def test_a_cell_that_raised_is_named_by_notebook_cell_and_error_in_one_line(monkeypatch, tmp_path):
    from papermill.exceptions import PapermillExecutionError

    def raises(source, target, parameters):
        raise PapermillExecutionError(4, 2, "raise ValueError(...)", "ValueError", "no column\n  'delta'",
                                      ["\x1b[0;31mValueError\x1b[0m: no column"])

    monkeypatch.setattr(notebooks, "execute_notebook", raises)
    with pytest.raises(notebooks.NotebookFailed) as failed:
        notebooks.execute_for(tmp_path, tmp_path, "20_statistics.ipynb", {})
    assert str(failed.value) == "notebooks/20_statistics.ipynb, cell In [2]: ValueError: no column 'delta'"
    assert (failed.value.ename, failed.value.executed) == ("ValueError", tmp_path / "notebooks" / "20_statistics.ipynb")


@pytest.mark.slow  # starts a kernel
def test_a_notebook_that_raises_is_named_by_the_cell_its_executed_copy_shows_failed(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Raises"),
                nbformat.v4.new_code_cell('out_dir = ""', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("columns = ['p']"),
                nbformat.v4.new_code_cell("raise KeyError('delta')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "raises.ipynb")
    with pytest.raises(notebooks.NotebookFailed) as failed:
        notebooks.execute_for(tmp_path / "out", tmp_path, "raises.ipynb", {"out_dir": str(tmp_path / "out")})
    executed = nbformat.read(tmp_path / "out" / "notebooks" / "raises.ipynb", as_version=4)
    failed_cells = [cell for cell in executed.cells if any(o.get("output_type") == "error" for o in cell.get("outputs", []))]
    assert [cell.source for cell in failed_cells] == ["raise KeyError('delta')"]
    assert str(failed.value) == f"notebooks/raises.ipynb, cell In [{failed_cells[0].execution_count}]: KeyError: 'delta'"


def test_a_failed_notebook_is_said_in_the_terminal_the_log_and_the_status(monkeypatch, tmp_path, capsys):
    executed = tmp_path / "notebooks" / "30_budget_spread.ipynb"
    failure = notebooks.NotebookFailed(executed, "In [2]", "ValueError", "$TYPHOON_PROFILES: no profiles file x.toml")

    def analysis_fails(out_dir, *args, **kwargs):
        raise grid.AnalysisFailed([failure], out_dir / "report.html")

    manifests = []
    monkeypatch.setattr(grid, "run_analysis", analysis_fails)
    monkeypatch.setattr(grid, "write_manifest", lambda *args, **kwargs: manifests.append(args[6]))
    policy = grid.FixedGrid(get_profile("smoke"), get_profile("smoke").grid(), GRID_PAGES)
    log = RunLog(tmp_path / "reproduce.log")
    run = dict(started="2026-12-04T00:00:00Z", wall_s=1.0, command=["reproduce"], code={})
    report = policy.finish(tmp_path, pd.DataFrame(columns=["record_path", "status", "error"]), log, run).report
    line = ("analysis failed: notebooks/30_budget_spread.ipynb, cell In [2]: ValueError: $TYPHOON_PROFILES: "
            "no profiles file x.toml")
    assert report == tmp_path / "report.html"  # written, naming the failure (tests/test_report.py)
    assert capsys.readouterr().err.strip() == line
    assert line in (tmp_path / "reproduce.log").read_text()
    failed = manifests[-1][manifests[-1]["status"] == "failed"]
    assert failed[["record_path", "error"]].values.tolist() == [["analysis 30_budget_spread.ipynb", line.partition(": ")[2]]]


def test_a_profile_runs_no_more_cells_at_once_than_there_are_usable_cores(monkeypatch):
    monkeypatch.setattr(machine, "gpu_devices", lambda: [])
    assert machine.choose_workers(None, 2, cores=2) == (2, None)
    workers_count, note = machine.choose_workers(None, 2, cores=1)
    assert workers_count == 1 and "1 usable core(s)" in note and "instead of the profile's 2" in note
    workers_count, note = machine.choose_workers(3, 2, cores=2)  # asked for: kept, with a warning
    assert workers_count == 3 and "share the cores" in note


def test_usable_cores_honour_a_container_quota(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs: rounded up
    assert machine.usable_cores(cpu_max) == min(2, machine.usable_cores(tmp_path / "none"))
    cpu_max.write_text("50000 100000\n")
    assert machine.usable_cores(cpu_max) == 1
    cpu_max.write_text("max 100000\n")
    assert machine.usable_cores(cpu_max) == machine.usable_cores(tmp_path / "none")


def test_a_cell_is_done_when_it_has_a_complete_record_of_the_same_run(tmp_path):
    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "random", "seed": 0})
    run_dir = tmp_path / config.relative_dir()
    assert not cell_is_done(config, tmp_path)
    run_record.write_record(run_dir, config, {"status": "failed", "error": "x"})
    assert not cell_is_done(config, tmp_path)  # a failed cell runs again
    run_record.write_record(run_dir, config, {"status": "ok"})
    assert cell_is_done(config, tmp_path)
    assert not cell_is_done(config.replace(p=0.2), tmp_path)  # another run in the same folder
    assert RunConfig.from_dict(run_record.read_json(run_dir / "config.json")) == config
