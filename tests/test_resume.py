"""Cells survive an interruption: a run interrupted right after it saved its resume state (end of the MLM
phase, each fine-tuning epoch) goes on from it when rerun, and writes the uninterrupted run's record bit for
bit but for wall-clock times and speeds; a state of another run is refused (typhoon/training/resume.py)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import REPO, torch_threads_kept

from typhoon import _faults
from typhoon.profiles import resolve
from typhoon.records import run_record
from typhoon.training import Boundary

# Typhoon learns a masking state (its EMA), so every kind of state is exercised; two fine-tuning epochs give
# a boundary between epochs as well as after the last. One thread, named: the smoke profile leaves the
# threads to torch, whose count differs between this process (a test may have set it) and a fresh one (the
# machine's cores), and the record holds the count and the sums it split.
CELL = dict(task="mrpc", backbone="tiny-random", strategy="typhoon", seed=0, max_train_examples=64,
            max_eval_examples=32, ft_epochs=2, num_threads=1)
# each boundary, and the fault-injection stage's name for it (typhoon._faults: ``state_saved:<label>``)
BOUNDARIES = [Boundary("mlm", 1), Boundary("ft", 1), Boundary("ft", 2)]
# metrics.json's wall-clock times and speeds, which differ between any two runs; everything else is compared
TIMED_SUFFIXES = ("wall_s", "tokens_per_s", "gflop_per_s", "cpu_s", "gflop_per_cpu_s", "peak_fraction")
COUNTED_TIMING = {"mlm_steps", "mlm_gflop", "ft_gflop"}


def untimed(metrics: dict) -> dict:
    """``metrics`` without its wall-clock times and speeds: ``timing``'s times and rates (its counts stay),
    the measured rates of ``hardware.matmul_peak`` and a task model's ``warmup_wall_s``."""
    metrics = json.loads(json.dumps(metrics))
    timing = metrics["timing"]
    timed = {key for key in timing if key.endswith(TIMED_SUFFIXES)}
    assert set(timing) - timed == COUNTED_TIMING, set(timing) - timed  # no other field is dropped
    metrics["timing"] = {key: timing[key] for key in COUNTED_TIMING}
    peak = metrics["hardware"]["matmul_peak"]
    del peak["gflop_per_s"], peak["by_shape"]
    (metrics.get("task_head") or {}).pop("warmup_wall_s", None)
    return metrics


def record_differences(expected: Path, got: Path) -> list[str]:
    """Every file of two record folders compared by its bytes (metrics.json: but its times and speeds)."""
    names = sorted(p.name for p in expected.iterdir())
    if names != sorted(p.name for p in got.iterdir()):
        return [f"files: {names} vs {sorted(p.name for p in got.iterdir())}"]
    differ = []
    for name in names:
        a, b = (expected / name).read_bytes(), (got / name).read_bytes()
        if name == "metrics.json":  # named with the top-level fields that differ, so a failure says where
            a, b = (untimed(json.loads(x)) for x in (a, b))
            fields = sorted(key for key in a.keys() | b.keys() if a.get(key) != b.get(key))
            if fields:
                differ.append(f"metrics.json: {', '.join(fields)}")
        elif a != b:
            differ.append(name)
    return differ


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run's record folder."""
    from typhoon.training.run import run

    config = resolve("smoke", CELL)
    out = tmp_path_factory.mktemp("uninterrupted")
    with torch_threads_kept():  # the config's one thread would stay for this worker's next tests
        run(config, out, progress=False)
    assert not run_record.resume_state_path(out / config.relative_dir()).exists()  # removed with the record
    return out / config.relative_dir()


@pytest.mark.slow  # trains the tiny backbone four times
@pytest.mark.parametrize("boundary", BOUNDARIES, ids=lambda boundary: boundary.label)
def test_a_run_interrupted_after_a_boundary_resumes_to_the_same_record(boundary, reference, tmp_path,
                                                                       monkeypatch, capfd):
    from typhoon.training.run import run

    config = resolve("smoke", CELL)
    run_dir = tmp_path / config.relative_dir()
    state = run_record.resume_state_path(run_dir)
    monkeypatch.setenv(_faults.ENV, json.dumps({"stage": f"state_saved:{boundary.label}", "action": "interrupt"}))
    with pytest.raises(KeyboardInterrupt):
        run(config, tmp_path, progress=False)
    monkeypatch.delenv(_faults.ENV)
    assert state.is_file() and not run_dir.exists()  # the state, no record
    assert torch.load(state, weights_only=True)["boundary"] == {"phase": boundary.phase, "epoch": boundary.epoch}
    capfd.readouterr()

    record = run(config, tmp_path, progress=False)
    said = capfd.readouterr()
    where = {"mlm": "MLM", "ft": "fine-tuning"}[boundary.phase] + f" epoch {boundary.epoch}"
    assert f"resuming after {where} from .seed0.resume.pt" in said.out, said  # news, on stdout
    assert "resuming" not in said.err, said.err
    assert record.resumed_after == where
    assert not record.skipped and record.metrics["status"] == "ok"
    assert record_differences(reference, run_dir) == []
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["seed0"]  # the state is gone with the record


@pytest.mark.slow  # `python -m typhoon run`, killed after its MLM phase, then the same command again
def test_a_killed_run_command_resumes_to_the_same_record(reference, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO), _faults.ENV: json.dumps({"stage": "state_saved:mlm1", "action": "kill"})}
    argv = [sys.executable, "-m", "typhoon", "run", "--profile", "smoke", "--out", str(out),
            *(f"--{key}={CELL[key]}" for key in ("task", "backbone", "strategy", "seed")),
            *(arg for key in ("max_train_examples", "max_eval_examples", "ft_epochs", "num_threads")
              for arg in ("--set", f"{key}={CELL[key]}"))]
    killed = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -9, killed.stderr[-3000:]
    run_dir = out / resolve("smoke", CELL).relative_dir()
    assert run_record.resume_state_path(run_dir).is_file() and not run_dir.exists()

    del env[_faults.ENV]
    again = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming after MLM epoch 1" in again.stdout and "resuming" not in again.stderr
    assert record_differences(reference, run_dir) == []
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["seed0"]


# --------------------------------------------------------------------------------------------------
# A state of another run is refused (fast: no training)


def context(**changes) -> SimpleNamespace:
    """What the resume state reads of a run's context, for a smoke cell with ``changes``."""
    config = resolve("smoke", {**CELL, **changes})
    return SimpleNamespace(config=config, device=torch.device("cpu"), precision=SimpleNamespace(name="fp32"),
                           attention="eager", dropout="fast", rng=np.random.default_rng(config.seed),
                           mask_generator=torch.Generator().manual_seed(config.seed))


def save_state(path: Path, ctx) -> None:
    from typhoon.masking import get_strategy
    from typhoon.training import resume

    resume.save(path, ctx, Boundary("ft", 1), strategy=get_strategy("random"),
                models={"classifier": {"w": torch.ones(2)}}, progress={"phase_one": {"loss_rows": []}, "elapsed_s": 1.0},
                record_path="x")


def test_a_state_of_another_config_or_code_is_refused(tmp_path, capsys, monkeypatch):
    from typhoon.training import resume

    path = tmp_path / ".seed0.resume.pt"
    save_state(path, context())
    assert not list(tmp_path.glob(".*.tmp-*"))  # written atomically
    same = resume.load(path, context(), "cell")
    assert same.boundary == Boundary("ft", 1) and same.progress["elapsed_s"] == 1.0
    assert torch.equal(same.models["classifier"]["w"], torch.ones(2))
    assert resume.saved_boundary(path) == Boundary("ft", 1)
    assert "cell: resuming after fine-tuning epoch 1 from .seed0.resume.pt" in capsys.readouterr().out

    other = context(ft_lr=3e-4)  # the same record folder, another run
    assert other.config.relative_dir() == context().config.relative_dir()
    assert resume.load(path, other, "cell") is None
    assert ("cell: resume state .seed0.resume.pt belongs to another run (differs in config.ft_lr); starting over"
            in capsys.readouterr().err)

    monkeypatch.setattr(resume, "code_version", lambda: "0.0+edited")  # the code changed since the save
    assert resume.load(path, context(), "cell") is None
    assert "(differs in code); starting over" in capsys.readouterr().err
    monkeypatch.undo()

    ctx = context()
    ctx.attention = "sdpa"  # the same config resolved to other kernels: other numerics
    assert resume.load(path, ctx, "cell") is None
    assert "(differs in attention)" in capsys.readouterr().err

    path.write_bytes(path.read_bytes()[:100])  # damaged (not by the atomic writer: a copy cut short, say)
    assert resume.load(path, context(), "cell") is None
    err = capsys.readouterr().err
    assert "resume state .seed0.resume.pt is unreadable" in err and "starting over" in err


def test_the_batch_says_where_a_cell_resumes(tmp_path):
    """Before it hands a cell out, the batch reads its resume state's boundary and says where the cell goes on
    from; a cell without one is not mentioned."""
    from typhoon.runner import Cell

    cell, other = Cell(context().config), Cell(context(seed=1).config)
    path = run_record.resume_state_path(tmp_path / cell.path)
    path.parent.mkdir(parents=True)
    save_state(path, context())
    assert cell.kind.resume_note(cell, tmp_path) == f"{cell.path}: resumes after fine-tuning epoch 1 (its resume state)"
    assert other.kind.resume_note(other, tmp_path) is None


def test_a_state_of_the_earlier_format_is_refused_saying_so(tmp_path, capsys):
    """The first format named its boundary by a string (``mlm``, ``ft1``): such a state, an interrupted run's made by
    an earlier version, is refused saying which format it is, and the batch reads no boundary from it."""
    from typhoon.training import resume

    path = tmp_path / ".seed0.resume.pt"
    save_state(path, context())
    state = torch.load(path, weights_only=True)
    fingerprint = {**json.loads(state["fingerprint"]), "format": 1}
    torch.save({**state, "fingerprint": json.dumps(fingerprint, sort_keys=True), "boundary": "ft1"}, path)
    assert resume.saved_boundary(path) is None
    assert resume.load(path, context(), "cell") is None
    assert ("cell: resume state .seed0.resume.pt was written by another version of the bundle (state format 1, "
            "this version reads 2); starting over") in capsys.readouterr().err


def test_a_boundary_is_a_phase_and_an_epoch():
    assert Boundary("mlm", 3).describe() == "MLM epoch 3" and Boundary("ft", 2).describe() == "fine-tuning epoch 2"
    assert Boundary.from_saved({"phase": "ft", "epoch": 2}) == Boundary("ft", 2)
    for bad, says in ((("eval", 1), "phase is mlm or ft, got 'eval'"), (("ft", -1), "whole number >= 0, got -1"),
                      (("mlm", "2"), "whole number >= 0, got '2'")):
        with pytest.raises(ValueError, match=re.escape(says)):
            Boundary(*bad)
    with pytest.raises(ValueError, match="the boundary 'mlm' is of an earlier resume-state format"):
        Boundary.from_saved("mlm")


def test_the_generators_come_back_as_saved(tmp_path):
    """Every generator the run draws from is restored: the draws after a restore are those after the save."""
    import random

    from typhoon.training import resume

    ctx = context()
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    ctx.rng.random(), torch.rand(3, generator=ctx.mask_generator)
    states = resume.rng_states(ctx)

    def draws():
        return (torch.rand(4).tolist(), np.random.rand(2).tolist(), random.random(), ctx.rng.random(3).tolist(),
                torch.rand(3, generator=ctx.mask_generator).tolist())

    expected = draws()
    draws()  # move every generator on
    path = tmp_path / "state.pt"
    torch.save(states, path)
    resume.restore_rng_states(ctx, torch.load(path, weights_only=True))
    assert draws() == expected
