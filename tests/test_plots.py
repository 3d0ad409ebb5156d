"""Tests for typhoon.plots: files are written, non-empty, and bad input raises."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from typhoon import plots as P
from typhoon import stats as S


def _results(strategies=("typhoon", "random", "wwm"), seeds=3, tasks=("mrpc",), backbones=("bert",)):
    rng = np.random.default_rng(1)
    rows = []
    for t in tasks:
        for b in backbones:
            for s in strategies:
                for k in range(seeds):
                    rows.append(dict(task=t, backbone=b, strategy=s, seed=k, status="ok", primary_metric="f1",
                                     primary_value=0.85 + rng.normal(0, 0.01), majority_value=0.81,
                                     record_path=f"runs/{t}/{b}/{s}/seed{k}"))
    return pd.DataFrame(rows)


def _check(paths):
    assert [p.suffix for p in paths] == [".png", ".svg"]
    for p in paths:
        assert p.is_file() and p.stat().st_size > 1000


def test_metric_per_seed_and_forest(tmp_path):
    r = _results(tasks=("mrpc", "cola"), backbones=("bert", "roberta"))
    _check(P.plot_metric_per_seed(r, tmp_path / "fig" / "metric_per_seed.png"))
    c = S.paired_comparisons(r)
    _check(P.plot_paired_differences(c, tmp_path / "fig" / "forest"))
    _check(P.plot_expected_max(S.expected_max_performance(r, ks=range(1, 6)), tmp_path / "evp"))


def test_single_seed_still_plots(tmp_path):
    r = _results(seeds=1)
    _check(P.plot_metric_per_seed(r, tmp_path / "m"))
    c = S.paired_comparisons(r, on_invalid="skip")
    _check(P.plot_paired_differences(c, tmp_path / "f"))


def test_bad_input_raises(tmp_path):
    r = _results()
    with pytest.raises(ValueError, match="primary_value"):
        P.plot_metric_per_seed(r.drop(columns="primary_value"), tmp_path / "x")
    with pytest.raises(ValueError, match="empty"):
        P.plot_metric_per_seed(r.iloc[:0], tmp_path / "x")
    with pytest.raises(ValueError, match="ci_low"):
        P.plot_paired_differences(pd.DataFrame({"task": ["a"]}), tmp_path / "x")
    with pytest.raises(TypeError):
        P.plot_loss_curves([1, 2, 3], tmp_path / "x")
    with pytest.raises(ValueError, match="1-D"):
        P.plot_weights_vs_probs(np.ones(3), np.ones(4), 0.15, tmp_path / "x")
    with pytest.raises(ValueError, match="no seen"):
        P.plot_prob_histogram(np.ones(3), 0.15, tmp_path / "x", seen=np.zeros(3, bool))
    with pytest.raises(ValueError, match="pi_ratio"):
        P.plot_calibration_sweep(pd.DataFrame({"method": ["minmax"], "delta": [0.1]}), tmp_path / "x")
    assert not list(tmp_path.glob("x*"))


def test_loss_curves(tmp_path):
    r = _results(seeds=2)
    for rec in r.record_path[:-1]:  # the last run has no loss file
        d = tmp_path / rec
        d.mkdir(parents=True)
        steps = np.arange(0, 50, 10)
        train = pd.DataFrame(dict(step=steps, epoch=0, split="train", loss=5 - 0.05 * steps))
        dev = pd.DataFrame(dict(step=[25, 49], epoch=[0, 1], split="dev", loss=[4.2, 3.9]))
        pd.concat([train, dev]).to_csv(d / "mlm_loss.csv", index=False)
    curves = P.load_loss_curves(r, tmp_path)
    assert list(curves.columns) == ["task", "backbone", "strategy", "seed", "step", "epoch", "split", "loss"]
    assert len(curves) == 5 * (5 + 2) and curves.attrs["missing"] == [r.record_path.iloc[-1]]
    with pytest.raises(FileNotFoundError):
        P.load_loss_curves(r, tmp_path, strict=True)
    _check(P.plot_loss_curves(curves, tmp_path / "loss"))
    with pytest.raises(ValueError, match="empty"):
        P.plot_loss_curves(P.load_loss_curves(r.iloc[-1:], tmp_path), tmp_path / "loss2")
    with pytest.raises(ValueError, match="record_path"):
        P.load_loss_curves(r.drop(columns="record_path"), tmp_path)


def test_budget_spread_figures(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.pareto(1.5, 200)
    seen = np.ones(200, bool)
    seen[:5] = False
    w[~seen] = np.nan
    pi = 0.15 * (0.6 + 0.4 * (w - np.nanmin(w)) / (np.nanmax(w) - np.nanmin(w)))
    _check(P.plot_weights_vs_probs(w, pi, 0.15, tmp_path / "rank", seen=seen))
    _check(P.plot_prob_histogram(pi, 0.15, tmp_path / "hist", seen=seen, counts=rng.integers(1, 100, 200)))
    sweep = pd.DataFrame(dict(method=["minmax", "minmax", "softmax", "softmax"], delta=[0.2, 0.4, 0.2, 0.4],
                              tau=[np.nan, np.nan, 1.0, 1.0], kl_to_uniform=[1e-4, 4e-4, 1e-2, 1e-2],
                              budget_moved=[0.01, 0.02, 0.2, 0.2], pi_ratio=[1.2, 1.6, 30, 30]))
    _check(P.plot_calibration_sweep(sweep, tmp_path / "sweep", paper_kl=7e-4))
