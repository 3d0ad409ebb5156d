"""The KL-gap study: each cause changes only what it says against the cpu profile's Typhoon cell, and the
table's intervals agree with scipy's on hand-made states."""

import json
import math
from dataclasses import asdict

import numpy as np
import pytest
from scipy import stats as st

from typhoon.masking import get_strategy, kl_to_uniform
from typhoon.studies.kl_gap import design as kl_gap_causes
from typhoon.studies.kl_gap import policy as kl_gap
from typhoon.studies.kl_gap.table import kl_gap_conclusion, kl_gap_display, kl_gap_table


def test_each_cause_changes_only_its_own_fields_of_the_cpu_typhoon_cell():
    baseline = asdict(kl_gap.cause_config(kl_gap_causes.cause_named("baseline"), "mrpc", 1))
    # the cpu profile's Typhoon cell at the paper's calibration (typhoon/profiles.toml)
    assert (baseline["backbone"], baseline["strategy"], baseline["seed"], baseline["p"], baseline["delta"],
            baseline["calibration"], baseline["lam"], baseline["mlm_epochs"]) == ("minilm-l6", "typhoon", 1, 0.15,
                                                                                   0.4, "minmax", 0.8, 1)
    for cause in kl_gap_causes.CAUSES:
        config = asdict(kl_gap.cause_config(cause, "mrpc", 1))
        changed = {k for k in config if config[k] != baseline[k]}
        assert changed == set(cause.overrides), cause.name
    with pytest.raises(ValueError, match=r"unknown cause 'weather'; choose one of \['baseline'"):
        kl_gap_causes.cause_named("weather")


def _write_state(out, cause, task, seed, spread, power=3):
    """A Typhoon state whose weights are a normal draw with the given spread to the given odd power (min-max
    calibration is blind to the spread; a lower power spreads the weights more evenly over the band)."""
    rng = np.random.default_rng(hash((cause, task, seed)) % 2**32)
    strategy = get_strategy("typhoon")
    counts = rng.integers(1, 50, size=300)
    strategy.prepare(counts)
    strategy.weights = rng.normal(0, spread, size=300) ** power
    strategy.seen[:] = True
    strategy.recalibrate()
    folder = kl_gap_causes.state_dir(out, cause, task, seed)
    folder.mkdir(parents=True)
    strategy.save(folder / kl_gap_causes.STATE_FILE)
    summary = {"numerics": {"precision": "fp32", "device": "cpu"}, "machine": {"cpu_features": ["avx2"]},
               "mlm_first_loss": 10.0, "mlm_last_loss": 7.0, "mlm_dev_loss": 7.1}
    (folder / kl_gap_causes.RUN_FILE).write_text(json.dumps(summary))
    return kl_to_uniform(strategy.probs, strategy.counts, strategy.p)


def test_table_intervals_agree_with_scipy_on_hand_made_states(tmp_path):
    kls = {}
    for cause, spread in (("baseline", 1.0), ("model", 3.0)):
        for task in ("mrpc", "cola"):
            for seed in (0, 1, 2):
                kls[cause, task, seed] = _write_state(tmp_path, cause, task, seed, spread)
    table = kl_gap_table(tmp_path).set_index("cause")
    assert list(table.index) == ["baseline", "model", "kl_definition"]
    for cause in ("baseline", "model"):
        logs = np.log([kls[cause, t, s] for t in ("mrpc", "cola") for s in (0, 1, 2)])
        low, high = st.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=st.sem(logs))
        row = table.loc[cause]
        assert row["n_states"] == 6
        assert math.isclose(row["kl"], math.exp(logs.mean()), rel_tol=1e-12)
        assert math.isclose(row["kl_ci_low"], math.exp(low), rel_tol=1e-9)
        assert math.isclose(row["kl_ci_high"], math.exp(high), rel_tol=1e-9)
        assert math.isclose(row["ratio_to_paper"], row["kl"] / 7e-4, rel_tol=1e-12)
    ratios = np.log([kls["model", t, s] / kls["baseline", t, s] for t in ("mrpc", "cola") for s in (0, 1, 2)])
    low, high = st.t.interval(0.95, 5, loc=ratios.mean(), scale=st.sem(ratios))
    b_low, b_high = st.t.interval(1 - 0.05 / (len(kl_gap_causes.CAUSES) - 1), 5, loc=ratios.mean(), scale=st.sem(ratios))
    model = table.loc["model"]
    assert math.isclose(model["change_ci_low"], math.exp(low), rel_tol=1e-9)
    assert math.isclose(model["change_ci_high_bonferroni"], math.exp(b_high), rel_tol=1e-9)
    assert model["raises_kl"] == ("yes" if low > 0 else "no: lowers it" if high < 0 else "not decided")
    assert math.isnan(table.loc["baseline", "change_vs_baseline"])


def test_the_reader_sees_the_registered_prediction_judged_from_the_paired_interval(tmp_path):
    """A 'model' cause whose weights fill the band more evenly than the baseline's raises the KL: the
    conclusion says the prediction holds, with the geometric-mean factor scipy gives; the kl_definition row
    (another KL of the same states) is no cause and claims no change."""
    kls = {(cause, t, s): _write_state(tmp_path, cause, t, s, 1.0, power)
           for cause, power in (("baseline", 7), ("model", 1)) for t in ("mrpc", "cola") for s in (0, 1, 2)}
    table = kl_gap_table(tmp_path)
    ratios = np.log([kls["model", t, s] / kls["baseline", t, s] for t in ("mrpc", "cola") for s in (0, 1, 2)])
    low, _ = st.t.interval(0.95, 5, loc=ratios.mean(), scale=st.sem(ratios))
    assert low > 0  # the hand-made states do what the test needs
    text = kl_gap_conclusion(table)
    assert f"×{math.exp(ratios.mean()):.2g} the baseline's" in text and "the registered prediction holds" in text
    assert "lies above 1 (unadjusted): model." in text  # not kl_definition, whichever way its KL reads
    shown = kl_gap_display(table).set_index("cause")
    assert shown.loc["kl_definition", "change vs baseline [95 %]"] == "—"
    assert shown.loc["baseline", "MLM loss: first step → dev"] == "10.00 → 7.10"


def test_an_empty_study_is_refused_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="no finished state of the KL-gap study"):
        kl_gap_table(tmp_path)
