"""One ``reproduce`` (typhoon.runner.executor_options): every flag honoured on every path or refused by name, and a
sequential design on a cluster runs its looks there (not the whole capped grid)."""

from __future__ import annotations

import contextlib
import time

import pytest

import typhoon.studies.profile_study as reproducing
from typhoon import cli
from typhoon.runner import cluster


class Done:
    ok = True


@pytest.mark.parametrize("flags, named", [(["--reuse-from", "results/cpu"], "--reuse-from"),
                                          (["--allow-mixed-precision"], "--allow-mixed-precision"),
                                          (["--estimate"], "decisive-design --profile decisive"),
                                          (["--workers", "0"], "--workers must be an integer >= 1, got 0")])
def test_a_flag_the_sequential_path_cannot_honour_is_refused_by_name(flags, named, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(reproducing, "reproduce", lambda *a, **k: pytest.fail("nothing may run"))
    started = time.perf_counter()
    assert cli.main(["reproduce", "--profile", "decisive", "--out", str(tmp_path / "out"), *flags]) == 2
    assert time.perf_counter() - started < 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_no_reuse_reaches_the_sequential_design(tmp_path, monkeypatch):
    seen = {}

    def fake_reproduce(profile, out, **kwargs):
        seen.update(profile=profile, **kwargs)
        return Done()

    monkeypatch.setattr(reproducing, "reproduce", fake_reproduce)
    assert cli.main(["reproduce", "--profile", "decisive", "--out", str(tmp_path), "--no-reuse", "--no-analysis"]) == 0
    assert seen["profile"] == "decisive" and seen["reuse"] is False and seen["analysis"] is False
    assert seen["executor"] is None


def test_a_sequential_design_on_a_cluster_runs_its_looks_there(tmp_path, monkeypatch, capsys):
    """Before, --cluster sent a design profile through the plain grid: all of its capped cells at once. Now one
    study loop runs both; the design's looks go to the cluster's executor."""
    seen, handed = {}, object()

    @contextlib.contextmanager
    def fake_executor(spec):
        seen["spec"] = spec
        yield handed

    def fake_reproduce(profile, out, **kwargs):
        seen.update(profile=profile, **kwargs)
        return Done()

    monkeypatch.setattr(cluster, "cluster_executor", fake_executor)
    monkeypatch.setattr(reproducing, "reproduce", fake_reproduce)
    assert cli.main(["reproduce", "--profile", "decisive", "--out", str(tmp_path), "--cluster", "slurm",
                     "--jobs", "2", "--commit-records"]) == 0
    assert seen["executor"] is handed and seen["workers"] == 1 and seen["commit_records"] is True
    assert seen["spec"].log_dir == str(tmp_path / "logs" / "slurm")
