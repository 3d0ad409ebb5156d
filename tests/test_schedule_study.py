"""The schedules grid's analysis (typhoon/studies/schedules/analysis.py) on synthetic results checked against scipy,
its registered hypothesis, the full-mask MLM loss against an explicit computation, and the identity and
reuse rules that let its fixed cells be the cpu profile's."""

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy import stats as st

from typhoon.profiles import Profile, get_profile, resolve
from typhoon.records import reuse, run_numerics, run_record, schema
from typhoon.studies.schedules import analysis as schedule_study

HYPOTHESIS = schedule_study.schedule_hypothesis("schedules")


def synthetic(dev: dict[str, list[float]], loss: dict[str, list[float]] | None = None, task="mrpc") -> pd.DataFrame:
    """A tidy results table: one ok run per arm (written ``strategy+schedule``, e.g. ``random+mixture``; the
    strategy alone under fixed) and seed, with the strategy and the schedule in their own columns."""
    rows = []
    for label, values in dev.items():
        strategy, _, schedule = label.partition("+")
        for seed, value in enumerate(values):
            rows.append(dict(task=task, backbone="minilm-l6", strategy=strategy, schedule=schedule or "fixed",
                             seed=seed, status="ok",
                             primary_metric="f1", primary_value=value,
                             mlm_full_mask_loss=(loss or {}).get(label, [np.nan] * len(values))[seed]))
    return pd.DataFrame(rows).reindex(columns=schema.RESULT_COLUMNS)


FIXED = [0.84, 0.85, 0.83, 0.86]


def test_each_schedule_against_fixed_matches_scipy():
    mixture = [0.845, 0.853, 0.839, 0.866]
    uniform = [0.80, 0.812, 0.787, 0.821]
    loss = {"random": [7.1, 7.0, 7.2, 7.1], "random+mixture": [5.0, 5.2, 5.1, 4.9], "random+uniform": [6.0, 6.1, 5.9, 6.2]}
    table = schedule_study.schedule_comparisons(
        synthetic({"random": FIXED, "random+mixture": mixture, "random+uniform": uniform}, loss), HYPOTHESIS)
    assert list(zip(table.strategy, table.schedule, strict=True)) == [("random", "uniform"), ("random", "mixture")]
    row = table.set_index("schedule").loc["mixture"]
    d = np.array(mixture) - np.array(FIXED)
    lo, hi = st.t.interval(0.95, 3, loc=d.mean(), scale=d.std(ddof=1) / 2)
    assert row["diff"] == pytest.approx(d.mean()) and (row.ci_low, row.ci_high) == (pytest.approx(lo), pytest.approx(hi))
    assert row.p == pytest.approx(st.ttest_rel(mixture, FIXED).pvalue)
    ps = table["p"].to_numpy()
    assert sorted(table["p_holm"]) == pytest.approx(sorted(np.minimum(1, np.maximum.accumulate(np.sort(ps) * [2, 1]))))
    lower = st.ttest_1samp(d, -0.01, alternative="greater").pvalue
    upper = st.ttest_1samp(d, 0.01, alternative="less").pvalue
    assert row.tost_p == pytest.approx(max(lower, upper)) and row.margin == 0.01
    uniform_row = table.set_index("schedule").loc["uniform"]
    assert uniform_row.outcome == "different" and row.outcome in ("equivalent", "inconclusive")
    loss_d = np.array(loss["random+mixture"]) - np.array(loss["random"])
    assert row.full_mask_loss_diff == pytest.approx(loss_d.mean())
    assert row.full_mask_loss_ci_high < 0 and row.observed == "lower" and row.theory == "agrees"
    text = schedule_study.schedule_conclusion(table, HYPOTHESIS)
    assert "2 comparisons" in text and "theory's direction is seen in 2 of 2" in text


def hand_holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment written out (Holm 1979): the i-th smallest of m p-values times (m - i),
    made non-decreasing in that order, capped at 1; an independent reference for the table's column."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, (len(pvalues) - rank) * pvalues[i])
        adjusted[i] = min(1.0, running)
    return adjusted


def test_the_loss_verdict_is_holm_adjusted_with_the_unadjusted_one_beside_it():
    # four comparisons whose full-mask loss falls by a little, each unadjusted p just under 0.05: an unadjusted
    # interval calls each "agrees", Holm over the four does not
    fixed_loss = [7.0, 7.1, 6.9]
    shifts = {"random+uniform": [-0.20, -0.25, -0.15], "random+mixture": [-0.18, -0.26, -0.16],
              "typhoon+uniform": [-0.21, -0.24, -0.13], "typhoon+mixture": [-0.50, -0.51, -0.49]}
    loss = {"random": fixed_loss, "typhoon": fixed_loss,
            **{label: [f + d for f, d in zip(fixed_loss, shift, strict=True)] for label, shift in shifts.items()}}
    dev = {label: FIXED[:3] for label in loss}
    table = schedule_study.schedule_comparisons(synthetic(dev, loss), HYPOTHESIS)
    labels = [f"{r.strategy}+{r.schedule}" for r in table.itertuples()]
    p_unadjusted = [st.ttest_1samp(shifts[label], 0.0).pvalue for label in labels]
    assert table["full_mask_loss_p"].tolist() == pytest.approx(p_unadjusted)
    assert table["full_mask_loss_p_holm"].tolist() == pytest.approx(hand_holm(p_unadjusted))
    assert table["full_mask_loss_holm_family"].iloc[0].startswith("Holm over the 4 comparisons")
    by_label = dict(zip(labels, table.itertuples(), strict=True))
    for label, p_raw in zip(labels, p_unadjusted, strict=True):
        row, p_adj = by_label[label], hand_holm(p_unadjusted)[labels.index(label)]
        assert row.theory_unadjusted == ("agrees" if p_raw < 0.05 else "not decided")
        assert row.theory == ("agrees" if p_adj < 0.05 else "not decided")
    assert by_label["random+uniform"].theory_unadjusted == "agrees" and by_label["random+uniform"].theory == "not decided"
    assert by_label["typhoon+mixture"].theory == "agrees"  # a tight fall survives the adjustment
    headline = schedule_study.headline(table)
    adjusted_agree = sum(p < 0.05 for p in hand_holm(p_unadjusted))
    raw_agree = sum(p < 0.05 for p in p_unadjusted)
    assert f"seen in {adjusted_agree} of 4 (Holm over the 4; unadjusted 95 % intervals: {raw_agree} of 4)" in headline
    shown = schedule_study.display_table(table).set_index(["strategy", "comparison"])
    assert shown.loc[("random", "uniform − fixed"), "theory (Holm)"] == "lower: not decided"
    assert shown.loc[("random", "uniform − fixed"), "unadjusted p: theory"].endswith(": agrees")


def test_a_loss_rise_is_a_disagreement_once_adjusted():
    loss = {"random": [7.0, 7.1, 6.9, 7.0], "random+mixture": [7.5, 7.62, 7.41, 7.49]}
    table = schedule_study.schedule_comparisons(synthetic({"random": FIXED, "random+mixture": FIXED}, loss), HYPOTHESIS)
    row = table.iloc[0]
    assert row.full_mask_loss_p_holm == pytest.approx(st.ttest_rel(loss["random+mixture"], loss["random"]).pvalue)
    assert (row.observed, row.theory, row.theory_unadjusted) == ("higher", "disagrees", "disagrees")


def test_without_full_mask_losses_the_theory_is_not_judged():
    table = schedule_study.schedule_comparisons(synthetic({"typhoon": FIXED, "typhoon+mixture": FIXED[::-1]}), HYPOTHESIS)
    assert table.iloc[0].observed == "not measured" and table.iloc[0].theory == "not decided"
    empty = schedule_study.schedule_comparisons(synthetic({"random": FIXED}), HYPOTHESIS)
    assert empty.empty and "No schedule runs" in schedule_study.schedule_conclusion(empty, HYPOTHESIS)


def test_a_bad_hypothesis_is_named():
    spec = get_profile("schedules")
    with pytest.raises(ValueError, match="registers no"):
        schedule_study.schedule_hypothesis(Profile(**{**spec.__dict__, "hypothesis": {}}))
    with pytest.raises(ValueError, match=r"margin needs a positive value for task\(s\) \['cola'\]"):
        schedule_study.schedule_hypothesis(Profile(**{**spec.__dict__, "hypothesis": {"margin": {"mrpc": 0.01}}}))
    bad = {"margin": {"mrpc": 0.01, "cola": 0.02}, "full_mask_loss": {"mixture": "smaller"}}
    with pytest.raises(ValueError, match="'lower' or 'higher'"):
        schedule_study.schedule_hypothesis(Profile(**{**spec.__dict__, "hypothesis": bad}))


def test_the_fixed_cells_are_the_cpu_profiles_and_pi0_matters_only_to_the_mixture():
    cell = dict(task="cola", backbone="minilm-l6", strategy="typhoon", seed=1)
    fixed = resolve("schedules", {**cell, "schedule": "fixed"})
    assert fixed.identity() == resolve("cpu", cell).identity() and fixed.pi0 == 0.1
    mixture = resolve("schedules", {**cell, "schedule": "mixture"})
    assert mixture.identity() != mixture.replace(pi0=0.2).identity()


def test_a_record_without_the_full_mask_loss_is_not_reused_for_the_schedules_grid(tmp_path):
    numerics = run_numerics.Numerics("fp32", "cpu", "avx2", "eager", "fast")
    here = run_numerics.BitSource(numerics, "AMD", "2.13.0+cpu")
    cpu = resolve("cpu", dict(task="mrpc", backbone="minilm-l6", strategy="random", seed=0))
    metrics = {"status": "ok", "final": {"dev_f1": 0.8}, "numerics": numerics.to_dict(),
               "hardware": {"cpu": {"model": "AMD EPYC"}}, "versions": {"torch": "2.13.0+cpu"}}
    run_record.write_record(tmp_path / "cpu" / cpu.relative_dir(), cpu, metrics)
    wanted = resolve("schedules", dict(task="mrpc", backbone="minilm-l6", strategy="random", seed=0))
    source, passed = reuse.find_equal_record(wanted, tmp_path / "schedules", [tmp_path / "cpu"], here=here,
                                             required=["mlm_full_mask_loss"])
    assert source is None and passed[0]["missing"] == ["mlm_full_mask_loss"]
    assert reuse.find_equal_record(wanted, tmp_path / "schedules", [tmp_path / "cpu"], here=here)[0] is not None
    run_record.write_record(tmp_path / "cpu" / cpu.relative_dir(), cpu, {**metrics, "mlm_full_mask_loss": 7.0})
    source, _ = reuse.find_equal_record(wanted, tmp_path / "schedules", [tmp_path / "cpu"], here=here,
                                        required=["mlm_full_mask_loss"])
    assert source == tmp_path / "cpu" / cpu.relative_dir()
    plan = reuse.ReusePlan(lacking=passed)
    assert "hold no mlm_full_mask_loss" in plan.lines()[0]


def test_the_full_mask_loss_is_the_mean_cross_entropy_with_every_token_masked():
    from typhoon.training import dev_losses
    from typhoon.training import run as training_run
    config = resolve("smoke", dict(task="mrpc", backbone="tiny-random", strategy="random", seed=0, max_eval_examples=12))
    ctx = training_run.set_up(config, progress=False)
    mlm = ctx.backbone.mlm_model(seed=0, **ctx.kernels).eval()
    tokenizer, total, count = ctx.backbone.tokenizer, 0.0, 0
    with torch.no_grad():
        for example in ctx.data["validation"]:  # one unpadded example at a time: an independent path
            ids = torch.tensor([example["input_ids"]])
            maskable = ~torch.tensor([example["special_tokens_mask"]], dtype=torch.bool)
            inputs = {"input_ids": ids.masked_fill(maskable, tokenizer.mask_token_id),
                      "attention_mask": torch.ones_like(ids)}
            if "token_type_ids" in example:
                inputs["token_type_ids"] = torch.tensor([example["token_type_ids"]])
            hidden = mlm.encoder(**inputs).last_hidden_state[maskable]
            total += float(F.cross_entropy(mlm.head(hidden).float(), ids[maskable], reduction="sum"))
            count += int(maskable.sum())
    assert dev_losses.full_mask_dev_loss(ctx, mlm) == pytest.approx(total / count, rel=1e-5)


def test_the_notebook_section_reads_the_folder_and_writes_its_table(tmp_path):
    table, text = schedule_study.study_of_folder(tmp_path)
    assert table.empty and "No `results.csv`" in text and "Registered before the runs" in text
    synthetic({"random": FIXED, "random+uniform": [0.80, 0.812, 0.787, 0.821]}).to_csv(tmp_path / "results.csv", index=False)
    table, text = schedule_study.study_of_folder(tmp_path)
    written = pd.read_csv(tmp_path / "stats" / "schedules_vs_fixed.csv")
    assert len(table) == len(written) == 1 and written.loc[0, "outcome"] == table.iloc[0].outcome == "different"
    assert "random, uniform − fixed (n = 4)" in text


def test_the_display_table_and_headline_say_what_the_comparisons_hold(tmp_path):
    loss = {"random": [7.1, 7.0, 7.2, 7.1], "random+mixture": [5.0, 5.2, 5.1, 4.9]}
    table = schedule_study.schedule_comparisons(
        synthetic({"random": FIXED, "random+mixture": [0.845, 0.853, 0.839, 0.866], "random+uniform": FIXED[::-1]},
                  loss), HYPOTHESIS)
    shown = schedule_study.display_table(table)
    assert list(shown["comparison"]) == ["uniform − fixed", "mixture − fixed"] and list(shown["seeds"]) == [4, 4]
    mixture, uniform = table.set_index("schedule").loc["mixture"], table.set_index("schedule").loc["uniform"]
    row = shown.set_index("comparison").loc["mixture − fixed"]
    assert row["dev metric difference [95 % CI]"] == f"f1 {mixture['diff']:+.4f} [{mixture.ci_low:+.4f}, {mixture.ci_high:+.4f}]"
    assert row["full-mask loss (nats)"] == f"{np.mean(loss['random']):.3f} → {np.mean(loss['random+mixture']):.3f}"
    assert row["theory (Holm)"] == "lower: agrees" and row["outcome"] == mixture.outcome
    # no full-mask loss for uniform: its loss cells say so instead of inventing an interval
    unmeasured = shown.set_index("comparison").loc["uniform − fixed"]
    assert unmeasured["theory (Holm)"] == "lower: not decided"
    assert unmeasured["full-mask loss (nats)"] == unmeasured["loss difference [95 % CI]"] == "—"
    assert np.isnan(uniform.full_mask_loss_diff)
    counts = ", ".join(f"{(table.outcome == o).sum()} {o}" for o in schedule_study.OUTCOMES if (table.outcome == o).any())
    assert schedule_study.headline(table).startswith(f"Dev metric: {counts} of 2 comparisons")
    assert "seen in 1 of 2" in schedule_study.headline(table)
    # a folder is a schedules study once the notebook section wrote its table, and only then
    assert not schedule_study.is_schedule_study(tmp_path)
    with pytest.raises(FileNotFoundError, match="schedules_vs_fixed.csv not found"):
        schedule_study.read_table(tmp_path)
    synthetic({"random": FIXED, "random+mixture": FIXED[::-1]}).to_csv(tmp_path / "results.csv", index=False)
    schedule_study.study_of_folder(tmp_path)
    assert schedule_study.is_schedule_study(tmp_path) and len(schedule_study.read_table(tmp_path)) == 1
