"""Tests for typhoon.report.figures: files are written, non-empty, and bad input raises."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from typhoon import figure_style
from typhoon.analysis import pairwise, run_summary, seed_budget
from typhoon.report import figures, masking_figures
from typhoon.studies.kl_original import figure as kl_figure


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
    _check(figures.plot_metric_per_seed(r, tmp_path / "fig" / "metric_per_seed.png"))
    c = pairwise.paired_comparisons(r)
    _check(figures.plot_paired_differences(c, tmp_path / "fig" / "forest"))
    _check(figures.plot_expected_max(seed_budget.expected_max_performance(r, ks=range(1, 6)), tmp_path / "evp"))


def test_single_seed_still_plots(tmp_path):
    r = _results(seeds=1)
    _check(figures.plot_metric_per_seed(r, tmp_path / "m"))
    c = pairwise.paired_comparisons(r, on_invalid="skip")
    _check(figures.plot_paired_differences(c, tmp_path / "f"))


def test_bad_input_raises(tmp_path):
    r = _results()
    with pytest.raises(ValueError, match="primary_value"):
        figures.plot_metric_per_seed(r.drop(columns="primary_value"), tmp_path / "x")
    with pytest.raises(ValueError, match="empty"):
        figures.plot_metric_per_seed(r.iloc[:0], tmp_path / "x")
    with pytest.raises(ValueError, match="ci_low"):
        figures.plot_paired_differences(pd.DataFrame({"task": ["a"]}), tmp_path / "x")
    with pytest.raises(TypeError):
        figures.plot_loss_curves([1, 2, 3], tmp_path / "x")
    with pytest.raises(ValueError, match="1-D"):
        masking_figures.plot_weights_vs_probs(np.ones(3), np.ones(4), 0.15, tmp_path / "x")
    with pytest.raises(ValueError, match="no seen"):
        masking_figures.plot_prob_histogram(np.ones(3), 0.15, tmp_path / "x", seen=np.zeros(3, bool))
    with pytest.raises(ValueError, match="pi_ratio"):
        masking_figures.plot_calibration_sweep(pd.DataFrame({"method": ["minmax"], "delta": [0.1]}), tmp_path / "x")
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
    curves = run_summary.load_loss_curves(r, tmp_path)
    assert list(curves.columns) == ["task", "backbone", "strategy", "seed", "step", "epoch", "split", "loss"]
    assert len(curves) == 5 * (5 + 2) and curves.attrs["missing"] == [r.record_path.iloc[-1]]
    with pytest.raises(FileNotFoundError):
        run_summary.load_loss_curves(r, tmp_path, strict=True)
    _check(figures.plot_loss_curves(curves, tmp_path / "loss"))
    with pytest.raises(ValueError, match="empty"):
        figures.plot_loss_curves(run_summary.load_loss_curves(r.iloc[-1:], tmp_path), tmp_path / "loss2")
    with pytest.raises(ValueError, match="record_path"):
        run_summary.load_loss_curves(r.drop(columns="record_path"), tmp_path)


def test_budget_spread_figures(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.pareto(1.5, 200)
    seen = np.ones(200, bool)
    seen[:5] = False
    w[~seen] = np.nan
    pi = 0.15 * (0.6 + 0.4 * (w - np.nanmin(w)) / (np.nanmax(w) - np.nanmin(w)))
    _check(masking_figures.plot_weights_vs_probs(w, pi, 0.15, tmp_path / "rank", seen=seen))
    _check(masking_figures.plot_prob_histogram(pi, 0.15, tmp_path / "hist", seen=seen, counts=rng.integers(1, 100, 200)))
    sweep = pd.DataFrame(dict(method=["minmax", "minmax", "softmax", "softmax"], delta=[0.2, 0.4, 0.2, 0.4],
                              tau=[np.nan, np.nan, 1.0, 1.0], kl_to_uniform=[1e-4, 4e-4, 1e-2, 1e-2],
                              budget_moved=[0.01, 0.02, 0.2, 0.2], pi_ratio=[1.2, 1.6, 30, 30]))
    _check(masking_figures.plot_calibration_sweep(sweep, tmp_path / "sweep", paper_kl=7e-4))


# --------------------------------------------------------------------------------------------------
# One style, readable at the report's size, and the defects readers saw


@pytest.fixture()
def saved_figures(monkeypatch):
    """Every figure saved while the test runs (drawn, as it was written)."""
    from matplotlib.figure import Figure

    saved, original = [], Figure.savefig

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if self not in saved:
            saved.append(self)

    monkeypatch.setattr(Figure, "savefig", record)
    return saved


def _texts(fig):
    """The texts a figure shows (tick labels of ticks outside an axis's view are never drawn)."""
    from matplotlib.text import Text

    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                if not lo - 1e-9 * (hi - lo) <= tick.get_loc() <= hi + 1e-9 * (hi - lo):
                    hidden |= {tick.label1, tick.label2}
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t not in hidden]


def _overlapping_ticks(ax, axis: str) -> list[str]:
    renderer = ax.figure.canvas.get_renderer()
    labels = [t for t in getattr(ax, f"get_{axis}ticklabels")() if t.get_visible() and t.get_text()]
    boxes = [t.get_window_extent(renderer) for t in labels]
    return [f"{a.get_text()} / {b.get_text()}" for i, (a, ba) in enumerate(zip(labels, boxes, strict=True))
            for b, bb in zip(labels[i + 1:], boxes[i + 1:], strict=True) if ba.overlaps(bb)]


def _assert_readable(fig) -> None:
    """At most the report's width, no text below the minimum size or cut off at an edge, no ticks overlapping."""
    width, _ = fig.get_size_inches()
    assert width <= figure_style.MAX_WIDTH_IN + 1e-9
    small = [(t.get_text(), t.get_fontsize()) for t in _texts(fig) if t.get_fontsize() < figure_style.MIN_FONT_PT]
    assert not small, small
    renderer = fig.canvas.get_renderer()
    cut = [t.get_text() for t in _texts(fig) if t.get_window_extent(renderer).x0 < -3
           or t.get_window_extent(renderer).x1 > fig.bbox.x1 + 3]
    assert not cut, f"text cut off at the figure's edge: {cut}"
    for ax in fig.axes:
        assert not _overlapping_ticks(ax, "x") and not _overlapping_ticks(ax, "y")


def test_every_figure_is_readable_at_the_reports_width(tmp_path, saved_figures):
    r = _results(tasks=("mrpc", "cola"), backbones=("bert", "roberta", "deberta"))
    comparisons = pairwise.paired_comparisons(r, aso_iterations=50, bootstrap_resamples=200)
    figures.plot_metric_per_seed(r, tmp_path / "m")
    figures.plot_paired_differences(comparisons, tmp_path / "f")
    figures.plot_expected_max(seed_budget.expected_max_performance(r, ks=range(1, 6)), tmp_path / "e")
    sweep = pd.DataFrame(dict(method=["minmax"] * 3 + ["softmax"], delta=[0.0, 0.4, 1.0, np.nan],
                              tau=[np.nan] * 3 + [1.0], kl_to_uniform=[1e-5, 4e-4, 1e-2, 1e-2],
                              budget_moved=[0.0, 0.02, 0.2, 0.2], pi_ratio=[1.0, 1.6, 30, 30]))
    masking_figures.plot_calibration_sweep(sweep, tmp_path / "s", paper_kl=7e-4)
    figures.plot_metric_per_seed(_results(), tmp_path / "one-backbone")  # the narrowest: its title must fit
    curves = pd.DataFrame(dict(task="mrpc", backbone="bert", strategy="random", seed=0, step=[1, 2, 2],
                               epoch=1, split=["train", "train", "dev"], loss=[10.3, 10.2, 10.25]))
    figures.plot_loss_curves(curves, tmp_path / "loss")
    assert len(saved_figures) == 6
    for fig in saved_figures:
        _assert_readable(fig)


def test_the_figure_defects_readers_saw_are_gone(tmp_path, saved_figures):
    from PIL import Image

    r = _results(seeds=2)
    # paired differences: x tick labels apart (their overlap was the defect), Holm p beside each row
    paths = figures.plot_paired_differences(pairwise.paired_comparisons(r, on_invalid="skip"), tmp_path / "f")
    fig = saved_figures[-1]
    assert not _overlapping_ticks(fig.axes[0], "x")
    assert all("Holm p" in t.get_text() for t in fig.axes[0].get_yticklabels())
    assert "Holm-adjusted" in Image.open(paths[0]).text["Description"]  # the caption rides in the PNG
    # expected max: whole seeds on the k axis, one legend for all panels
    figures.plot_expected_max(seed_budget.expected_max_performance(r, ks=range(1, 4)), tmp_path / "e")
    fig = saved_figures[-1]
    for ax in fig.axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
        assert ax.get_legend() is None
    assert len(fig.legends) == 1
    # one run's curves: a one-epoch run's epoch axis shows epoch 1, not 0.96-1.04
    loss = pd.DataFrame(dict(step=[1, 2, 3, 3], split=["train"] * 3 + ["dev"], loss=[10.31, 10.32, 10.311, 10.318]))
    figures.plot_run_curves(loss, pd.DataFrame(dict(epoch=[1], dev_f1=[0.81])), "f1", 0.8, tmp_path / "run")
    loss_ax, metric_ax = saved_figures[-1].axes
    assert list(metric_ax.get_xticks()) == [1]
    # no "+1.031e1" offset above an axis
    for ax in (loss_ax, metric_ax):
        assert ax.yaxis.get_offset_text().get_text() == "" and ax.xaxis.get_offset_text().get_text() == ""
    # metric per seed: each mean ± CI marker sits beside its own strategy's dots
    figures.plot_metric_per_seed(_results(), tmp_path / "m")
    ax = saved_figures[-1].axes[0]
    dots = [line for line in ax.get_lines() if line.get_marker() == "o" and line.get_color() != "black"]
    means = [line for line in ax.get_lines() if line.get_color() == "black" and line.get_marker() == "o"]
    for dot, mean in zip(dots, means, strict=True):
        assert abs(float(mean.get_xdata()[0]) - np.mean(dot.get_xdata())) < 0.35


def test_style_does_not_leak_into_the_callers_matplotlib(tmp_path):
    import matplotlib

    before = dict(matplotlib.rcParams)
    figures.plot_metric_per_seed(_results(), tmp_path / "m")
    assert dict(matplotlib.rcParams) == before


def test_budget_vs_difference_is_readable(tmp_path, saved_figures):
    verdict = pd.DataFrame(dict(
        task=["mrpc"] * 4 + ["cola"] * 4,
        strategy=["typhoon", "typhoon_rank", "typhoon_softmax", "typhoon_task"] * 2,
        saliency=["mlm", "mlm", "mlm", "task"] * 2, budget_moved=[0.004, 0.07, 0.37, np.nan] * 2,
        diff=[0.002, -0.004, 0.012, 0.0] * 2, ci_low=[-0.01, -0.02, -0.005, np.nan] * 2,
        ci_high=[0.014, 0.012, 0.03, np.nan] * 2))
    _check(masking_figures.plot_budget_vs_difference(verdict, tmp_path / "bv", margin=0.01))
    (fig,) = saved_figures
    _assert_readable(fig)
    with pytest.raises(ValueError, match="budget_moved"):
        masking_figures.plot_budget_vs_difference(verdict.drop(columns="budget_moved"), tmp_path / "bad")


def test_budget_ticks_are_readable_percentages(tmp_path, saved_figures):
    """Budgets of 0.4 %, 7 % and 37 %: on a linear axis formatted without decimals every tick read 0 % or 1 %."""
    verdict = pd.DataFrame(dict(task="mrpc", strategy=["typhoon", "typhoon_rank", "typhoon_softmax"],
                                saliency="mlm", budget_moved=[0.004, 0.07, 0.37], diff=[0.0, 0.01, -0.01],
                                ci_low=[-0.01, 0.0, -0.02], ci_high=[0.01, 0.02, 0.0]))
    masking_figures.plot_budget_vs_difference(verdict, tmp_path / "bv", margin=0.01)
    (fig,) = saved_figures
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ax.get_xscale() == "log" and len(labels) == len(set(labels)) >= 4
    assert {"0.5 %", "1 %", "10 %"} <= set(labels)
    lo, hi = ax.get_xlim()
    assert lo < 0.004 and hi > 0.37  # every point inside
    assert [masking_figures.percent_label(x) for x in (0.004, 0.07, 0.3, 0.0005)] == ["0.4 %", "7 %", "30 %", "0.05 %"]


def test_the_schedules_figure_shows_each_comparison_against_its_own_margin(tmp_path, saved_figures):
    from typhoon.studies.schedules import analysis as schedule_study

    rng = np.random.default_rng(3)
    rows = []
    for task, metric in (("mrpc", "f1"), ("cola", "mcc")):
        for label, loss in (("random", 7.0), ("random+uniform", 6.5), ("random+mixture", 6.0), ("typhoon", 7.0),
                            ("typhoon+mixture", 7.3)):
            strategy, _, schedule = label.partition("+")
            rows += [dict(task=task, backbone="minilm-l6", strategy=strategy, schedule=schedule or "fixed", seed=k,
                          status="ok", primary_metric=metric,
                          primary_value=0.5 + rng.normal(0, 0.01), mlm_full_mask_loss=loss + rng.normal(0, 0.02),
                          record_path=f"runs/{task}/minilm-l6/{label}/seed{k}") for k in range(3)]
    table = schedule_study.schedule_comparisons(pd.DataFrame(rows), schedule_study.schedule_hypothesis("schedules"))
    _check(figures.plot_schedule_comparisons(table, tmp_path / "schedules"))
    (fig,) = saved_figures
    _assert_readable(fig)
    metric_ax, loss_ax = fig.axes
    assert len(metric_ax.get_yticklabels()) == len(table) == 6
    # the grey band of each row spans that row's task margin (MRPC ±0.01 F1, CoLA ±0.02 MCC)
    grey = [c for c in metric_ax.collections if len(c.get_facecolor()) and np.allclose(c.get_facecolor()[0][:3], 0.9)]
    assert len(grey) == len(table)
    bands = sorted({round(float(c.get_paths()[0].vertices[:, 0].max()), 6) for c in grey})
    assert bands == [0.01, 0.02]
    # typhoon+mixture's loss rose: its interval is coloured "disagrees", the others "agrees"
    assert set(table["theory"]) == {"agrees", "disagrees"}
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {"theory (Holm) agrees", "theory (Holm) disagrees"}
    with pytest.raises(ValueError, match="full_mask_loss_diff"):
        figures.plot_schedule_comparisons(table.drop(columns="full_mask_loss_diff"), tmp_path / "bad")


def test_the_palette_is_seaborns_colorblind_without_importing_seaborn():
    """figure_style spells out seaborn's "colorblind" palette so that no figure module imports seaborn (about 0.8 s
    of a cell kernel's imports); the colours, cycling past ten, are seaborn's own."""
    import seaborn as sns

    for n in (1, 2, 4, 10, 13):
        assert figure_style.colorblind(n) == list(sns.color_palette("colorblind", n))
    palette = figure_style.strategy_palette(["whole_word", "random", "typhoon", "random"])
    assert palette == dict(zip(["random", "typhoon", "whole_word"], sns.color_palette("colorblind", 3), strict=True))
    package = Path(figure_style.__file__).parent
    importers = [str(p.relative_to(package)) for p in package.rglob("*.py")
                 if re.search(r"^\s*(import seaborn|from seaborn)", p.read_text(encoding="utf-8"), flags=re.M)]
    assert importers == []


def test_the_saliency_scatter_is_one_image_in_the_svg_not_a_marker_per_type(tmp_path):
    """One point per seen token type (tens of thousands on a real vocabulary): drawn as vector markers, the
    SVG grew past 1.8 MB for 12,000 types; rasterized, the points are one embedded image."""
    rng = np.random.default_rng(0)
    weights = rng.pareto(2.0, 5000) + 0.01
    probs = 0.15 * weights / weights.mean()
    svg = masking_figures.plot_weights_vs_probs(weights, np.clip(probs, 0, 1), 0.15, tmp_path / "rank")[1]
    text = svg.read_text(encoding="utf-8")
    assert text.count("<image") == 1
    assert text.count("<use") < 1000  # the ticks' and the legend's markers (352), not one per type (5,000 more)


def test_the_kl_curve_draws_each_run_and_its_power_law_to_the_planned_end(tmp_path, saved_figures):
    """kl-original's curve: one line per run through its epochs' KLs, and each run's fitted line reaching, at its
    task's planned end, exp(intercept + slope · log E) -- computed here by hand for an exact power law."""
    from typhoon.studies.kl_original.design import CURVE_EPOCHS

    laws = {("mrpc", 0): (2e-4, -0.3), ("mrpc", 1): (1e-4, 0.2), ("cola", 0): (5e-5, 0.5)}
    curves = pd.DataFrame([{"task": task, "seed": seed, "epoch": e, "bernoulli": a * e ** b}
                           for (task, seed), (a, b) in laws.items() for e in range(1, 6 if task == "mrpc" else 8)])
    _check(kl_figure.plot_kl_curve(curves, tmp_path / "curve"))
    fig = saved_figures[-1]
    _assert_readable(fig)
    for ax in fig.axes:
        task = ax.get_title().split(":")[0]
        assert ax.get_title() == f"{task}: {5 if task == 'mrpc' else 7} of {CURVE_EPOCHS[task]} MLM epochs"
        ends = sorted(round(float(line.get_ydata()[-1]), 12) for line in ax.get_lines()
                      if line.get_linestyle() == "--" and len(line.get_xdata()) > 2)
        hand = sorted(round(a * CURVE_EPOCHS[task] ** b, 12) for (t, _), (a, b) in laws.items() if t == task)
        assert ends == pytest.approx(hand, rel=1e-9)
        paper = [line for line in ax.get_lines() if list(line.get_ydata()) == [7e-4, 7e-4]]
        assert len(paper) == 1
    with pytest.raises(ValueError, match="bernoulli"):
        kl_figure.plot_kl_curve(curves.drop(columns="bernoulli"), tmp_path / "bad")
