"""Reuse of an equal run's record (typhoon.records.reuse): only with this machine's numerics, never from the
committed reference runs unless named, and never a plain copy of the same profile's grid (fast: records
written by hand, no training)."""

import json

import pytest
import torch

from typhoon import atomic, paths
from typhoon.profiles import get_profile, resolve
from typhoon.records import reuse, run_numerics, run_record
from typhoon.studies.grid import policy as grid
from typhoon.studies.profile_study import reproduce
from typhoon.training import device_settings

BF16_AMX = run_numerics.Numerics("bf16", "cpu", "amx", "eager", "fast")
FP32_AVX2 = run_numerics.Numerics("fp32", "cpu", "avx2", "eager", "fast")
CPU_FLAGS = {"amx": {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": True,
                     "model": "Intel(R) Xeon(R) Platinum 8488C"},
             "avx2": {"avx2": True, "model": "AMD EPYC 7763 64-Core Processor"}}
TORCH = "2.13.0+cpu"
#: what decides a run's bits on the machine each numerics above comes from: an Intel Xeon with AMX, an AMD EPYC
#: with AVX2 only, one torch build
ON_XEON = run_numerics.BitSource(BF16_AMX, "Intel", TORCH)
ON_EPYC = run_numerics.BitSource(FP32_AVX2, "AMD", TORCH)


def ran(numerics: run_numerics.Numerics, model: str | None = None, torch_build: str = TORCH) -> dict:
    """metrics.json of a finished run with these numerics, as an older record stores them (no `numerics`), on
    the CPU of :data:`CPU_FLAGS` for its kernels unless ``model`` names another."""
    flags = CPU_FLAGS["amx" if numerics.kernels == "amx" else "avx2"]
    return {"status": "ok", "final": {"dev_f1": 0.8}, "precision": numerics.precision, "device": numerics.device,
            "attention": numerics.attention, "dropout": numerics.dropout,
            "hardware": {"cpu": {**flags, "model": model or flags["model"]}}, "versions": {"torch": torch_build}}


def settings_of(numerics: run_numerics.Numerics) -> device_settings.RunSettings:
    """What a run with these numerics resolved its ``auto`` settings to."""
    return device_settings.RunSettings(torch.device(numerics.device), device_settings.Precision(numerics.precision, "by hand"),
                                       numerics.attention, numerics.dropout, threads=1)


def write(folder, config, numerics=BF16_AMX, **where):
    """The record of ``config`` as a finished run writes it (its config.json with what ``auto`` resolved to);
    ``where``: :func:`ran`'s CPU model and torch build."""
    run_record.write_record(folder / config.relative_dir(), settings_of(numerics).stored_config(config),
                            ran(numerics, **where))


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with outputs/ and a committed results/ of its own."""
    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path)
    (tmp_path / "outputs").mkdir()
    (tmp_path / "results").mkdir()
    return tmp_path


class Stop(Exception):
    pass


CPU = get_profile("cpu").grid()[0]  # precision "auto"
BOTTLENECK = CPU.replace(profile="bottleneck")  # the same run, another profile


def test_an_older_records_numerics_are_worked_out_from_what_it_stored():
    assert run_numerics.numerics_of_metrics(ran(BF16_AMX)) == BF16_AMX
    assert run_numerics.numerics_of_metrics(ran(FP32_AVX2)) == FP32_AVX2
    assert run_numerics.numerics_of_metrics({**ran(FP32_AVX2), "numerics": BF16_AMX.to_dict()}) == BF16_AMX
    assert run_numerics.kernel_family("fp32", "cpu", CPU_FLAGS["amx"], {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}) == \
        "avx512 (MKL_ENABLE_INSTRUCTIONS=AVX2)"
    assert run_numerics.kernel_family("bf16", "cuda", None) == "cuda"
    assert BF16_AMX.label == "bf16 on cpu" and BF16_AMX.key != run_numerics.Numerics(
        "bf16", "cpu", "avx512_bf16", "eager", "fast").key  # AMX and AVX512-BF16: one label, two keys


def test_a_record_stores_what_auto_resolved_to_and_still_completes_its_cell(tmp_path):
    assert (CPU.precision, CPU.attention, CPU.dropout) == ("auto", "auto", "auto")
    write(tmp_path, CPU, FP32_AVX2)
    stored = run_record.read_config(tmp_path / CPU.relative_dir())
    assert (stored.precision, stored.attention, stored.dropout) == ("fp32", "eager", "fast")
    older = tmp_path / "older"  # a record written before records stored resolved values: its metrics say them
    run_record.write_record(older / CPU.relative_dir(), CPU, ran(FP32_AVX2))
    assert run_record.read_config(older / CPU.relative_dir()).precision == "auto"
    for out in (tmp_path, older):
        assert run_record.is_complete(out / CPU.relative_dir(), CPU)  # asked for auto: whatever auto gave
        assert run_record.is_complete(out / CPU.relative_dir(), CPU.replace(precision="fp32"))
        assert not run_record.is_complete(out / CPU.relative_dir(), CPU.replace(precision="bf16"))


def test_the_committed_results_are_searched_only_when_named(repo):
    write(repo / "results" / "bottleneck", BOTTLENECK)
    write(repo / "outputs" / "bottleneck", BOTTLENECK)
    out = repo / "outputs" / "cpu"
    assert reuse.reuse_candidates(out) == [(repo / "outputs" / "bottleneck").resolve()]
    assert reuse.reuse_candidates(repo / "results" / "cpu") == [(repo / "outputs" / "bottleneck").resolve()]
    named = reuse.reuse_candidates(out, [repo / "results" / "bottleneck"])
    assert named[0] == (repo / "results" / "bottleneck").resolve() and len(named) == 2


def test_a_record_with_other_numerics_is_not_reused_and_the_reason_is_said(repo):
    write(repo / "outputs" / "bottleneck", BOTTLENECK, BF16_AMX)
    out = repo / "outputs" / "cpu"
    source, passed = reuse.find_equal_record(CPU, out, here=ON_EPYC)
    assert source is None and passed[0]["theirs"] == ON_XEON.label and passed[0]["ours"] == ON_EPYC.label
    source, passed = reuse.find_equal_record(CPU, out, here=ON_XEON)
    assert source == (repo / "outputs" / "bottleneck" / CPU.relative_dir()).resolve() and passed == []
    # an explicit precision that differs from what the record ran is another run
    assert reuse.find_equal_record(CPU.replace(precision="fp32"), out, here=ON_XEON)[0] is None


@pytest.mark.parametrize("where, differs", [
    ({"model": "Intel(R) Xeon(R) Gold 6338"}, "Intel cpu"),  # the same AVX2 fp32 kernels, another vendor's CPU
    ({"torch_build": "2.12.0+cpu"}, "torch 2.12.0+cpu"),  # the same CPU, another torch build
    ({"model": "QEMU Virtual CPU"}, "unknown cpu"),  # a CPU no vendor is known of: nothing says it matches
])
def test_a_record_of_the_same_numerics_on_another_cpu_vendor_or_torch_build_is_not_reused(repo, where, differs):
    """Equal numerics (precision, kernel family, attention, dropout) are not enough: another vendor's library
    code paths or another torch build sum in another order, so the record is not what this machine computes."""
    write(repo / "outputs" / "bottleneck", BOTTLENECK, FP32_AVX2, **where)
    out = repo / "outputs" / "cpu"
    source, passed = reuse.find_equal_record(CPU, out, here=ON_EPYC)
    assert source is None and differs in passed[0]["theirs"] and passed[0]["ours"] == ON_EPYC.label
    line = reuse.ReusePlan(other_numerics=passed).lines()[0]
    assert line.startswith("not reused: 1 equal record(s) ran with other numerics, CPU vendor or torch build")
    assert differs in line and "AMD cpu" in line
    write(repo / "outputs" / "bottleneck", BOTTLENECK, FP32_AVX2)  # the same record made on this kind of machine
    assert reuse.find_equal_record(CPU, out, here=ON_EPYC)[0] is not None


def test_the_same_profiles_records_count_only_in_a_named_folder(repo):
    write(repo / "outputs" / "elsewhere", CPU)
    out = repo / "outputs" / "cpu"
    assert reuse.find_equal_record(CPU, out, here=ON_XEON)[0] is None  # a separate reproduction of the grid
    named = reuse.find_equal_record(CPU, out, [repo / "outputs" / "elsewhere"], here=ON_XEON)[0]
    assert named == (repo / "outputs" / "elsewhere" / CPU.relative_dir()).resolve()
    assert reuse.find_equal_record(CPU.replace(seed=1), out, here=ON_XEON)[0] is None  # another run


def here_is(monkeypatch, here: run_numerics.BitSource) -> None:
    """This machine, where the grid's numerics check and its reuse read it, is ``here``."""
    monkeypatch.setattr(device_settings, "numerics_here", lambda config: here.numerics)
    monkeypatch.setattr(device_settings, "planned_numerics", lambda config: here.numerics.label)
    monkeypatch.setattr(grid, "bit_source_here", lambda config: here)


def test_reproduce_copies_nothing_from_results_and_never_mixes_on_another_cpu(repo, monkeypatch):
    """The issue's fresh clone on an AVX2-only CPU: results/bottleneck holds bf16 records equal to 12 cpu
    cells. `reproduce --profile cpu` must train them all here, not copy them and then refuse the mix."""
    for config in get_profile("cpu").grid():
        write(repo / "results" / "bottleneck", config.replace(profile="bottleneck"), BF16_AMX)
    here_is(monkeypatch, ON_EPYC)
    monkeypatch.setattr(grid, "preflight", lambda configs: None)
    seen = []

    def first_look(policy, out_dir, log, last):
        seen.append([c for c in policy.configs if not run_record.is_complete(out_dir / c.relative_dir(), c)])
        raise Stop

    monkeypatch.setattr(grid.FixedGrid, "next_look", first_look)
    with pytest.raises(Stop):
        reproduce("cpu", repo / "outputs" / "cpu", analysis=False)
    assert len(seen[0]) == 18 and not (repo / "outputs" / "cpu" / "runs").exists()
    # named, with matching numerics, they are copied and say where from
    here_is(monkeypatch, ON_XEON)
    seen.clear()
    with pytest.raises(Stop):
        reproduce("cpu", repo / "outputs" / "cpu", analysis=False, reuse_from=[repo / "results" / "bottleneck"])
    assert seen[0] == []
    copy = json.loads((repo / "outputs" / "cpu" / CPU.relative_dir() / "metrics.json").read_text())
    assert copy["reused_from"]["profile"] == "bottleneck"


def test_a_reuse_folder_without_records_is_refused_by_name(repo):
    with pytest.raises(ValueError, match=r"--reuse-from 'nowhere'.*no run records"):
        paths.check_reuse_source("nowhere")


def test_an_alias_cell_records_the_parameters_its_name_fixes():
    rank = resolve("bottleneck", dict(task="mrpc", strategy="typhoon_rank", seed=0))
    task = resolve("bottleneck", dict(task="mrpc", strategy="typhoon_task", seed=0))
    assert rank.calibration == "rank" and task.saliency == "task"
    assert rank.identity() == resolve("bottleneck", dict(task="mrpc", strategy="typhoon_rank", seed=0),
                                      {"calibration": "rank"}).identity()
    with pytest.raises(ValueError, match="typhoon_rank.*fixes calibration='rank'"):
        resolve("bottleneck", dict(task="mrpc", strategy="typhoon_rank", seed=0), {"calibration": "softmax"})


def test_older_records_are_rewritten_to_resolved_values_and_still_complete_their_cells(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("resolve_record_configs", paths.repo_root() / "scripts" /
                                                  "resolve_record_configs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rank = resolve("bottleneck", dict(task="mrpc", strategy="typhoon_rank", seed=0))
    run_dir = tmp_path / "runs" / "mrpc" / "minilm-l6" / "typhoon_rank" / "seed0"
    write(tmp_path, rank)
    old = {**rank.to_dict(), "precision": "auto", "attention": "auto", "dropout": "auto", "calibration": "minmax"}
    atomic.atomic_write_json(run_dir / "config.json", old)  # as the committed records said before
    assert script.resolve_folder(tmp_path) == 1 and script.resolve_folder(tmp_path) == 0
    stored = json.loads((run_dir / "config.json").read_text())
    assert (stored["precision"], stored["attention"], stored["calibration"]) == ("bf16", "eager", "rank")
    assert run_record.is_complete(run_dir, rank)


def test_a_reused_record_removes_the_cells_resume_state(tmp_path):
    """A copied record completes the cell, so the state an interrupted run of it left has no use."""
    write(tmp_path / "elsewhere", BOTTLENECK)
    state = run_record.resume_state_path(tmp_path / "out" / CPU.relative_dir())
    state.parent.mkdir(parents=True)
    state.write_bytes(b"state")
    reuse.reuse_record(CPU, tmp_path / "out", tmp_path / "elsewhere" / BOTTLENECK.relative_dir())
    assert run_record.is_complete(tmp_path / "out" / CPU.relative_dir(), CPU) and not state.exists()
