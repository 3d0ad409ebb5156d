"""Tests for typhoon.analysis.identifiability: exact enumeration against brute force, the mode-form identity to
1e-10, the second-order factorisation, mode blindness, the three experiments, and the notebook's layer
(settings, tables, figures, conclusions checked against the tables). The schedules are tested in
test_schedules.py."""

from __future__ import annotations

import csv
import dataclasses
import math
from itertools import combinations, product
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from notebook_here import run_notebook_here

from typhoon.analysis import identifiability as idf
from typhoon.masking.schedules import (
    FixedMaskingRatio,
    FixedVisibleCount,
    MixtureSchedule,
    UniformMaskingRatio,
    with_full_mask,
)

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------
# Small laws and brute-force references (explicit loops over sequences and visible sets)
# --------------------------------------------------------------------------------------------------


def random_product_mode(rng, length, num_symbols):
    return idf.ProductMode(rng.dirichlet(np.ones(num_symbols), size=length))


def random_markov_mode(rng, length, num_symbols):
    return idf.MarkovMode(rng.dirichlet(np.ones(num_symbols)), rng.dirichlet(np.ones(num_symbols), size=num_symbols),
                          length)


def mixed_law(length=4, num_symbols=2, seed=0):
    """A product mode, a Markov mode and a third product mode: exercises every code path."""
    rng = np.random.default_rng(seed)
    modes = (random_product_mode(rng, length, num_symbols), random_markov_mode(rng, length, num_symbols),
             random_product_mode(rng, length, num_symbols))
    return idf.MixtureLaw(modes, [0.5, 0.3, 0.2])


def all_sequences(length, num_symbols):
    return np.array(list(product(range(num_symbols), repeat=length)))


def brute_joint(mode_probability, length, num_symbols):
    table = np.zeros((num_symbols,) * length)
    for x in product(range(num_symbols), repeat=length):
        table[x] = mode_probability(x)
    return table


def brute_conditional(table, seqs, x, visible, target):
    """q(x_target | x_visible) by summing the table over matching sequences."""
    on_context = np.all(seqs[:, list(visible)] == x[list(visible)], axis=1)
    on_both = on_context & (seqs[:, target] == x[target])
    values = table[tuple(seqs.T)]
    return values[on_both].sum() / values[on_context].sum()


def brute_masked_cross_entropy(p_table, q_table, visible_count):
    length, num_symbols = p_table.ndim, p_table.shape[0]
    seqs = all_sequences(length, num_symbols)
    total, pairs = 0.0, 0
    for visible in combinations(range(length), visible_count):
        for target in (i for i in range(length) if i not in visible):
            pairs += 1
            for x in seqs:
                if p_table[tuple(x)] > 0:
                    total -= p_table[tuple(x)] * math.log(brute_conditional(q_table, seqs, x, visible, target))
    return total / pairs


def brute_posteriors(law, alternative, visible):
    """For every full sequence x: p(x), p(m | x_S), q_λ(m | x_S), by explicit sums."""
    seqs = all_sequences(law.length, law.num_symbols)
    mode_tables = [m.joint() for m in law.modes]
    rows = []
    for x in seqs:
        on_context = np.all(seqs[:, list(visible)] == x[list(visible)], axis=1)
        per_mode = np.array([t[tuple(seqs[on_context].T)].sum() for t in mode_tables])
        p_x = sum(a * t[tuple(x)] for a, t in zip(law.weights, mode_tables, strict=True))
        w = law.weights * per_mode / (law.weights @ per_mode)
        u = alternative * per_mode / (alternative @ per_mode)
        rows.append((p_x, w, u))
    return rows


# --------------------------------------------------------------------------------------------------
# Laws and enumeration against brute force
# --------------------------------------------------------------------------------------------------


def test_mode_joints_match_brute_force():
    rng = np.random.default_rng(1)
    prod_mode, markov = random_product_mode(rng, 3, 3), random_markov_mode(rng, 3, 3)
    expected_prod = brute_joint(lambda x: np.prod([prod_mode.probs[j, x[j]] for j in range(3)]), 3, 3)
    expected_markov = brute_joint(
        lambda x: markov.initial[x[0]] * markov.transition[x[0], x[1]] * markov.transition[x[1], x[2]], 3, 3
    )
    assert np.allclose(prod_mode.joint(), expected_prod, atol=1e-15)
    assert np.allclose(markov.joint(), expected_markov, atol=1e-15)
    assert np.allclose(markov.position_marginals(), [expected_markov.sum(axis=tuple(a for a in range(3) if a != j))
                                                     for j in range(3)])


def test_subset_marginals_match_brute_force():
    law = mixed_law(length=3, num_symbols=3)
    joint = law.joint()
    for subset, table in law.subset_marginals().items():
        rest = tuple(j for j in range(3) if j not in subset)
        assert np.allclose(table, joint.sum(axis=rest), atol=1e-15), subset


@pytest.mark.parametrize(("length", "num_symbols"), [(3, 3), (4, 2)])
def test_masked_cross_entropy_matches_brute_force(length, num_symbols):
    law = mixed_law(length, num_symbols)
    rng = np.random.default_rng(7)
    q_table = rng.dirichlet(np.ones(num_symbols**length)).reshape((num_symbols,) * length)  # any law q
    cross_entropy, kl = idf.conditional_risks_by_visible_count(law, q_table)
    own_entropy, _ = idf.conditional_risks_by_visible_count(law, law)
    for v in range(length):
        assert cross_entropy[v] == pytest.approx(brute_masked_cross_entropy(law.joint(), q_table, v), abs=1e-12)
        assert kl[v] == pytest.approx(cross_entropy[v] - own_entropy[v], abs=1e-12)
    schedule = with_full_mask(FixedMaskingRatio(0.5), 0.3)
    assert idf.masked_risk(law, q_table, schedule) - idf.masked_risk(law, law, schedule) == pytest.approx(
        idf.masked_discrepancy(law, q_table, schedule), abs=1e-12
    )


def test_posterior_quantities_match_brute_force():
    law = mixed_law(length=4, num_symbols=2)
    alternative = np.array([0.2, 0.3, 0.5])
    information = idf.mode_information_by_visible_count(law, alternative)
    covariance = idf.residual_mode_covariance(law)
    for v in range(law.length + 1):
        subsets = list(combinations(range(law.length), v))
        info = cov = 0.0
        for visible in subsets:
            for p_x, w, u in brute_posteriors(law, alternative, visible):
                info += p_x * np.sum(w * np.log(w / u)) / len(subsets)
                cov = cov + p_x * (np.diag(w) - np.outer(w, w)) / len(subsets)
        assert information[v] == pytest.approx(info, abs=1e-12)
        assert np.allclose(covariance[v], cov, atol=1e-12)
    assert np.allclose(idf.residual_mode_uncertainty(law), 0.5 * np.trace(covariance, axis1=1, axis2=2))


# --------------------------------------------------------------------------------------------------
# The exact identities (1e-10) and the second-order factorisation
# --------------------------------------------------------------------------------------------------

SCHEDULES = [
    UniformMaskingRatio(),
    FixedMaskingRatio(0.25),
    with_full_mask(UniformMaskingRatio(0.0, 0.5), 0.05),
    MixtureSchedule((FixedVisibleCount(1), FixedVisibleCount(4)), (0.4, 0.6)),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("seed", [0, 1])
def test_mode_form_identity_to_1e10(schedule, seed):
    law = mixed_law(length=6, num_symbols=2, seed=seed)
    check = idf.check_factorisation(law, [0.1, 0.6, 0.3], schedule)
    assert check.direct > 1e-4  # a macroscopic reweighting, not a trivially small number
    assert check.abs_error < 1e-10


def test_chain_rule_and_endpoints_to_1e10():
    law = mixed_law(length=5, num_symbols=2, seed=3)
    alternative = np.array([0.25, 0.25, 0.5])
    q = law.reweighted(alternative)
    information = idf.mode_information_by_visible_count(law, alternative)
    kl_alpha = float(np.sum(law.weights * np.log(law.weights / alternative)))
    assert information[0] == pytest.approx(kl_alpha, abs=1e-12)
    assert information[-1] == pytest.approx(kl_alpha - idf.joint_kl(law, q), abs=1e-12)
    # chain rule for any q: d_v = k(v+1) - k(v), k(v) = mean KL of the marginals on sets of size v
    rng = np.random.default_rng(0)
    q_any = rng.dirichlet(np.ones(2**5)).reshape((2,) * 5)
    k = idf.marginal_kl_by_visible_count(law, q_any)
    p_marg, q_marg = law.subset_marginals(), idf.subset_marginals(q_any, 5)
    assert k[2] == pytest.approx(np.mean([np.sum(p_marg[s] * np.log(p_marg[s] / q_marg[s]))
                                          for s in combinations(range(5), 2)]), abs=1e-12)
    assert k[0] == pytest.approx(0.0, abs=1e-15) and k[5] == pytest.approx(idf.joint_kl(law, q_any), abs=1e-12)
    _, kl = idf.conditional_risks_by_visible_count(law, q_any)
    assert np.allclose(kl, np.diff(k), atol=1e-10)
    # so the masked-diffusion schedule measures the joint KL: D = KL(p || q) / N
    assert idf.masked_discrepancy(law, q_any, UniformMaskingRatio()) == pytest.approx(
        idf.joint_kl(law, q_any) / 5, abs=1e-10
    )


def test_two_mode_closed_form_and_bound():
    rng = np.random.default_rng(5)
    law = idf.MixtureLaw((random_markov_mode(rng, 4, 2), random_product_mode(rng, 4, 2)), [0.35, 0.65])
    alternative = np.array([0.6, 0.4])
    r = idf.odds_ratio(law, alternative)
    information = idf.mode_information_by_visible_count(law, alternative)
    for v in (0, 2, 4):
        subsets = list(combinations(range(4), v))
        closed = sum(p_x * idf.two_mode_posterior_kl(w[0], r) / len(subsets)
                     for s in subsets for p_x, w, _ in brute_posteriors(law, alternative, s))
        assert information[v] == pytest.approx(closed, abs=1e-12)
    w = np.linspace(0, 1, 101)
    assert np.all(idf.two_mode_posterior_kl(w, r) <= (r + 1 / r - 2) * w * (1 - w) + 1e-15)
    for schedule in SCHEDULES[:3]:
        assert idf.masked_discrepancy(law, law.reweighted(alternative), schedule) <= idf.two_mode_discrepancy_bound(
            law, alternative, schedule)


def test_second_order_factorisation_ratio_tends_to_one():
    law = mixed_law(length=5, num_symbols=2, seed=2)
    schedule = with_full_mask(FixedMaskingRatio(0.4), 0.1)
    direction = np.array([1.0, -0.5, -0.5])
    gaps = []
    for eps in (1e-1, 1e-2, 1e-3):
        alternative = law.weights * np.exp(eps * direction)
        check = idf.check_factorisation(law, alternative / alternative.sum(), schedule)
        assert check.abs_error < 1e-12
        gaps.append(abs(check.second_order_ratio - 1))
    assert gaps[2] < 1e-2 and gaps[1] < gaps[0] and gaps[2] < gaps[1]
    # the remainder is third order: the relative gap shrinks linearly in eps
    assert gaps[2] / gaps[1] == pytest.approx(0.1, rel=0.3)


def test_residual_uncertainty_bounds_for_product_modes():
    law = idf.separated_product_law(8, 2, [0.7, 0.3], leak=(0.1, 0.2))
    mmse = idf.residual_mode_uncertainty(law)
    assert mmse[0] == pytest.approx(0.21) and np.all(np.diff(mmse) <= 1e-15)
    bc = np.sum(np.sqrt(law.modes[0].probs[0] * law.modes[1].probs[0]))
    assert np.all(mmse <= 0.5 * math.sqrt(0.21) * bc ** np.arange(9) + 1e-15)


# --------------------------------------------------------------------------------------------------
# Mode blindness and its cure
# --------------------------------------------------------------------------------------------------


def test_disjoint_supports_known_by_hand():
    """Disjoint supports: one visible symbol reveals the mode, so only full-mask mass sees the weights."""
    law = idf.separated_product_law(4, 4, [0.7, 0.3], leak=0.0, rng=np.random.default_rng(0))
    assert np.allclose(idf.residual_mode_uncertainty(law), [0.21, 0, 0, 0, 0], atol=1e-15)
    alternative = [0.4, 0.6]
    kl_by_hand = 0.7 * math.log(0.7 / 0.4) + 0.3 * math.log(0.3 / 0.6)
    blind = UniformMaskingRatio(0.0, 0.75)  # at least one symbol visible
    q = law.reweighted(alternative)
    assert idf.masked_discrepancy(law, q, blind) == pytest.approx(0.0, abs=1e-15)
    assert idf.total_variation(law, q) == pytest.approx(0.3, abs=1e-12)  # yet the joints differ a lot
    for pi0 in (0.01, 0.2):
        assert idf.masked_discrepancy(law, q, with_full_mask(blind, pi0)) == pytest.approx(pi0 * kl_by_hand,
                                                                                                abs=1e-12)
        # Pinsker: |α - λ| <= sqrt(D / (2 π0)) = sqrt(KL / 2)
        assert 0.3 <= idf.full_mask_weight_error_bound(pi0 * kl_by_hand, pi0)


def test_full_mask_bound_holds_for_arbitrary_models():
    law = idf.separated_product_law(3, 4, [0.8, 0.2], rng=np.random.default_rng(1))
    schedule = with_full_mask(FixedMaskingRatio(0.34), 0.05)
    rng = np.random.default_rng(2)
    for _ in range(5):
        q_table = rng.dirichlet(np.ones(4**3)).reshape(4, 4, 4)
        marginals = np.stack([q_table.sum(axis=tuple(a for a in range(3) if a != j)) for j in range(3)])
        recovered = idf.fully_masked_mode_weights(law, marginals)
        bound = idf.full_mask_weight_error_bound(idf.masked_discrepancy(law, q_table, schedule), 0.05)
        assert np.max(np.abs(recovered - law.weights)) <= bound


def test_discrepancy_decays_exponentially_in_min_visible():
    law = idf.separated_product_law(8, 2, [0.7, 0.3], leak=(0.05, 0.1))
    table = idf.discrepancy_vs_min_visible(law, [0.4, 0.6])
    assert np.allclose(table["discrepancy"], table["mode_form"], atol=1e-10)
    assert table["total_variation"].nunique() == 1 and table["total_variation"].iloc[0] > 0.29
    for _, part in table.groupby("family"):
        assert np.all(np.diff(part["discrepancy"]) < 0)  # monotone decay in v_min
        assert np.all(part["discrepancy"] <= part["upper_bound"])
        assert np.all(np.diff(part["mmse_at_v_min"]) < 0)
    capped = table[table.family == "uniform_ratio_capped"]
    assert capped["discrepancy"].iloc[0] == pytest.approx(capped["joint_kl"].iloc[0] / 8, abs=1e-12)
    rates = idf.decay_rates(table)
    chernoff = idf.chernoff_information(law.modes[0].probs[0], law.modes[1].probs[0])
    assert np.all(rates["r2_log"] > 0.95)
    assert np.all((rates["rate"] > 0.5 * chernoff) & (rates["rate"] < 2 * chernoff))


def test_chernoff_information():
    p0, p1 = np.array([0.9, 0.1]), np.array([0.1, 0.9])
    assert idf.chernoff_information(p0, p1) == pytest.approx(-math.log(2 * math.sqrt(0.09)), rel=1e-6)
    assert idf.chernoff_information(p0, p0) == pytest.approx(0.0, abs=1e-9)
    assert idf.chernoff_information([1.0, 0.0], [0.0, 1.0]) == math.inf


def test_law_validation():
    good = idf.ProductMode(np.full((3, 2), 0.5))
    with pytest.raises(ValueError, match="at least two modes"):
        idf.MixtureLaw((good,), [1.0])
    with pytest.raises(ValueError, match="summing to 1"):
        idf.MixtureLaw((good, good), [0.5, 0.6])
    with pytest.raises(ValueError, match="sum to 1"):
        idf.ProductMode(np.full((3, 2), 0.4))
    with pytest.raises(ValueError, match="share"):
        idf.MixtureLaw((good, idf.ProductMode(np.full((4, 2), 0.5))), [0.5, 0.5])
    with pytest.raises(ValueError, match="MAX_ENUMERATED_SEQUENCES"):
        idf.separated_product_law(18, 2, [0.5, 0.5], leak=0.1).joint()
    with pytest.raises(ValueError, match="overlap"):
        idf.mode_identifying_sets(idf.separated_product_law(3, 2, [0.5, 0.5], leak=0.1))
    with pytest.raises(ValueError, match="alternative mode weights"):
        idf.mode_information_by_visible_count(mixed_law(3), [0.5, 0.5])
    with pytest.raises(ValueError, match="two modes"):
        idf.odds_ratio(mixed_law(3), [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="pi0=0"):
        idf.full_mask_weight_error_bound(0.1, 0)
    with pytest.raises(ValueError, match="leak"):
        idf.separated_product_law(3, 2, [0.5, 0.5], leak=1.0)


# --------------------------------------------------------------------------------------------------
# Fits
# --------------------------------------------------------------------------------------------------


def test_decay_fits_recover_known_curves():
    v = np.arange(1, 30)
    assert idf.fit_exponential_decay(v, 3 * np.exp(-0.4 * v))["rate"] == pytest.approx(0.4)
    assert idf.fit_power_law(v, 2 * v**-0.7)["exponent"] == pytest.approx(0.7)
    winner = idf.compare_decay_fits(v, 2 * v**-0.7).query("better")["model"].item()
    assert winner == "power_law"
    assert idf.compare_decay_fits(v, np.exp(-0.3 * v)).query("better")["model"].item() == "exponential"


# --------------------------------------------------------------------------------------------------
# (b) training
# --------------------------------------------------------------------------------------------------


def test_training_recovers_with_full_mask_and_is_blind_without():
    law = idf.separated_product_law(4, 4, [0.75, 0.25], rng=np.random.default_rng(1))
    blind = UniformMaskingRatio(0.0, 0.5)
    schedules = {"blind": (0.0, blind), "pi0=0.5": (0.5, with_full_mask(blind, 0.5))}
    kwargs = dict(n_train=300, n_seeds=2, steps=120, lr=0.1, seed=3)
    table = idf.train_mode_weight_recovery(law, schedules, **kwargs)
    again = idf.train_mode_weight_recovery(law, schedules, **kwargs)
    assert table.equals(again)  # explicit generators: reproducible
    cured = table[table.schedule == "pi0=0.5"]
    # the model reaches the best estimate the data allow, and respects the Pinsker guarantee
    assert np.allclose(cured["recovered_weight"], cured["full_mask_fraction"], atol=0.01)
    assert np.all(cured["error"] <= cured["error_bound"])
    assert table.loc[table.schedule == "blind", "n_full_mask"].eq(0).all()
    summary = idf.recovery_error_summary(table)
    assert list(summary["schedule"]) == ["blind", "pi0=0.5"]


def test_blind_schedule_cannot_see_mode_weights_of_a_trained_model():
    """Under a blind schedule the masked risk of a model is flat in its mode weights (disjoint supports)."""
    law = idf.separated_product_law(4, 4, [0.75, 0.25], rng=np.random.default_rng(1))
    blind = UniformMaskingRatio(0.0, 0.5)
    import torch

    model = idf.MixtureOfProductsPredictor(1, 2, 4, 4, torch.Generator().manual_seed(0))
    with torch.no_grad():  # a model that has specialised its components on the two alphabets
        model.symbol_logits[0, 0, :, 2:] = -40.0
        model.symbol_logits[0, 1, :, :2] = -40.0
    q = model.as_mixture_law(0)
    risks = [idf.masked_risk(law, q.reweighted([lam, 1 - lam]), blind) for lam in (0.1, 0.5, 0.9)]
    assert max(risks) - min(risks) < 1e-12
    cured = with_full_mask(blind, 0.1)
    assert idf.masked_risk(law, q.reweighted([0.1, 0.9]), cured) > idf.masked_risk(law, q, cured) + 1e-3


# --------------------------------------------------------------------------------------------------
# (c) real text
# --------------------------------------------------------------------------------------------------


def test_prose_sentences_are_colas_train_and_dev(glue_dir, monkeypatch):
    def column(name):  # the official TSVs: source, label, mark, sentence; no header, no quoting
        with open(glue_dir / "CoLA" / name, encoding="utf-8", newline="") as fh:
            return [row[3] for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)]

    sentences = idf.load_prose_sentences(glue_dir)
    assert sentences == column("train.tsv") + column("dev.tsv") and len(sentences) == 8551 + 1043
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(glue_dir))
    assert idf.load_prose_sentences() == sentences  # no folder given: wherever typhoon.data.glue_files.load_glue looks


def test_text_mode_uncertainty_smoke(glue_dir):
    code = idf.load_code_texts(max_files=20)
    prose = idf.load_prose_sentences(glue_dir)[:3000]
    table = idf.text_mode_uncertainty(code, prose, snippet_length=16, n_snippets=200, orders=2, seed=0)
    assert list(table["visible"]) == list(range(17))
    assert table["posterior_variance"].iloc[0] == pytest.approx(0.25, abs=1e-6)
    assert table["posterior_variance"].iloc[-1] < 0.15 and table["accuracy"].iloc[-1] > 0.8
    again = idf.text_mode_uncertainty(code, prose, snippet_length=16, n_snippets=200, orders=2, seed=0)
    assert table.equals(again)


# --------------------------------------------------------------------------------------------------
# The notebook's layer: settings, the three studies, tables, figures and conclusions
# --------------------------------------------------------------------------------------------------


def test_study_settings():
    settings = idf.study_settings(n_seeds=3, pi0_values=[0.1, 0.5])
    assert settings.n_seeds == 3 and settings.pi0_values == (0.1, 0.5) and settings.length == 12
    quick = idf.study_settings(quick=True, length=6)
    assert (quick.length, quick.n_seeds, quick.snippet_length, quick.tail_from) == (6, 8, 32, 4)
    assert idf.study_settings(quick=True).length == 8
    assert set(settings.table()["setting"]) == {f.name for f in dataclasses.fields(idf.StudySettings)}
    with pytest.raises(ValueError, match=r"unknown study setting\(s\) \['lenght'\]; choose from \[.*'length'"):
        idf.study_settings(lenght=6)
    with pytest.raises(ValueError, match="n_seeds=0"):
        idf.study_settings(n_seeds=0)
    with pytest.raises(ValueError, match="tail_from=40"):
        idf.study_settings(snippet_length=32, tail_from=40)


SMALL_STUDY = dict(length=5, train_length=4, pi0_values=[0.1, 0.5], n_train=200, n_seeds=3, steps=60,
                   snippet_length=12, n_snippets=150, orders=2, tail_from=3)


@pytest.fixture(scope="module")
def small_studies():
    settings = idf.study_settings(**SMALL_STUDY)
    return idf.discrepancy_study(settings), idf.recovery_study(settings), idf.text_study(settings)


def _log_line_slope(x, y):
    """Least-squares slope of log y on x by the normal equations (independent of typhoon's fits)."""
    x, y = np.asarray(x, dtype=float), np.log(np.asarray(y, dtype=float))
    return float(np.sum((x - x.mean()) * (y - y.mean())) / np.sum((x - x.mean()) ** 2))


def test_conclusions_quote_the_tables(small_studies):
    a, b, c = small_studies
    fixed = a.table[a.table.family == "fixed_visible"]
    rate = -_log_line_slope(fixed["v_min"], fixed["discrepancy"])
    text = idf.discrepancy_conclusion(a)
    assert f"Fitted exponential rates: {rate:.3f} per visible coordinate" in text
    assert f"at $v_{{\\min}}={a.law.length - 1}$" in text and f"is {a.chernoff:.3f}." in text

    blind = b.table[b.table.schedule == "blind"]
    cured = b.table[b.table.pi0 > 0]
    rmse = cured.groupby("pi0")["error"].apply(lambda e: np.sqrt(np.mean(e**2)))
    text = idf.recovery_conclusion(b)
    assert f"averages {blind.recovered_weight.mean():.3f} against a true 0.75" in text
    assert f"log-log slope is {_log_line_slope(np.log(rmse.index), rmse):.2f}" in text
    assert f"({int((cured.error <= cured.error_bound).sum())} of {len(cured)})" in text

    part = c.table[c.table.visible >= 1]
    v, y = part["visible"].to_numpy(float), np.log(part["posterior_variance"].to_numpy())
    residual = {name: np.sqrt(np.mean((y - np.polyval(np.polyfit(x, y, 1), x)) ** 2))
                for name, x in (("exponential", v), ("power law", np.log(v)))}
    better = min(residual, key=residual.get)
    text = idf.text_conclusion(c)
    assert f"the **{better}** fits better" in text
    assert f"{residual['power law']:.3f} (power law" in text and f"vs {residual['exponential']:.3f} (exponential" in text


def test_compare_fits_names_what_is_missing(small_studies):
    fits = small_studies[2].fits
    assert idf.compare_fits(fits, "brier", 3).better in ("exponential", "power_law")
    with pytest.raises(ValueError, match=r"no fits of 'brier' over 'v >= 7'"):
        idf.compare_fits(fits, "brier", 7)


def test_tables_and_figures_are_written(small_studies, tmp_path):
    written = []
    for study in small_studies:
        written += idf.write_tables(study.tables(), tmp_path / "stats")
    assert sorted(p.name for p in (tmp_path / "stats").iterdir()) == sorted(p.name for p in written)
    assert len(written) == 7  # and no temporary file is left behind
    for study in small_studies:
        for name, frame in study.tables().items():
            back = pd.read_csv(tmp_path / "stats" / f"{name}.csv")
            assert list(back.columns) == list(frame.columns) and len(back) == len(frame)
    a, b, c = small_studies
    for plot, study, name in ((idf.plot_discrepancy_decay, a, "a"), (idf.plot_mode_weight_recovery, b, "b"),
                              (idf.plot_text_uncertainty, c, "c")):
        paths = plot(study, tmp_path / "figures" / name)
        assert [p.name for p in paths] == [f"{name}.png", f"{name}.svg"] and all(p.stat().st_size > 0 for p in paths)
    assert len(list((tmp_path / "figures").iterdir())) == 6


# --------------------------------------------------------------------------------------------------
# Slow: the full training experiment and the notebook
# --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_recovery_error_scales_like_inverse_sqrt_pi0():
    law = idf.separated_product_law(6, 4, [0.75, 0.25], rng=np.random.default_rng(1))
    blind = UniformMaskingRatio(0.0, 0.5)
    schedules = {"blind": (0.0, blind)}
    schedules.update({f"pi0={p}": (p, with_full_mask(blind, p)) for p in (0.02, 0.05, 0.1, 0.2, 0.5)})
    table = idf.train_mode_weight_recovery(law, schedules, n_train=600, n_seeds=24, steps=150, lr=0.1, seed=0,
                                           exact_discrepancy=False)
    summary = idf.recovery_error_summary(table)
    cured = summary[summary.pi0 > 0]
    slope = -idf.fit_power_law(cured["pi0"], cured["rmse"])["exponent"]
    assert -0.75 < slope < -0.3
    assert summary.loc[summary.schedule == "blind", "rmse"].item() > 2 * cured["rmse"].min()


def test_notebook_runs_quick(tmp_path):
    """The theory notebook's quick version writes its three figures and tables (its code run in this process,
    tests/notebook_here.py; the smoke run executes it in a kernel)."""
    out_dir = tmp_path / "outputs"
    run_notebook_here(REPO / "notebooks" / "40_mask_schedules.ipynb", {"quick": True, "out_dir": str(out_dir)})
    figures = {p.name for p in (out_dir / "figures").iterdir()}
    stats_files = {p.name for p in (out_dir / "stats").iterdir()}
    for name in ("mask_schedules_a_discrepancy", "mask_schedules_b_recovery", "mask_schedules_c_text"):
        assert {f"{name}.png", f"{name}.svg"} <= figures
    assert {"mask_schedules_a_discrepancy.csv", "mask_schedules_b_recovery.csv",
            "mask_schedules_c_text.csv"} <= stats_files
