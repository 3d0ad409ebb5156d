"""What stands behind each verdict of the decisive study (typhoon/studies/sequential/checks.py), against
references built here: the power of the design against a fixed-sample TOST computed by integration (one
look) and against a stopping rule simulated here with numpy (every look); the committed study's power
against an independent simulation (issue 36); kernel families read from hand-made records; the verdict
without the mixed seeds against intervals computed here."""

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy import stats as st

from typhoon.analysis import sequential as sq
from typhoon.paths import repo_root
from typhoon.profiles import get_profile
from typhoon.records import run_numerics, run_record
from typhoon.studies.sequential import checks as decisive_checks
from typhoon.studies.sequential import decisive
from typhoon.studies.sequential import design as decisive_design

ALPHA = 0.005  # the decisive design's per-comparison error, each decision
STUDY = sq.Design((3, 6, 10, 13, 16), ALPHA, ALPHA)


def binomial_tolerance(p: float, *studies: int) -> float:
    """Four standard errors of the difference of simulated proportions (or of one against an exact value)."""
    return 4 * np.sqrt(sum(p * (1 - p) / n for n in studies)) + 1e-3


# --------------------------------------------------------------------------------------------------
# Power of the design


def fixed_sample_decision_probability(n: int, sd: float, margin: float, alpha: float) -> float:
    """P(equivalent or different) at difference 0 for one look at ``n`` seeds: TOST at ``alpha`` per side and
    the two-sided t test at ``alpha``, integrated over the sample sd ((n-1)s²/σ² ~ χ²(n-1)); given s, the mean
    is N(0, σ²/n): equivalent when |mean| < margin − t_e·se, different when |mean| > t_d·se."""
    t_e, t_d, dof = st.t.isf(alpha, n - 1), st.t.isf(alpha / 2, n - 1), n - 1
    sigma_mean = sd / np.sqrt(n)

    def given(q):  # q = (n-1)s²/σ²
        se = sd * np.sqrt(q / dof) / np.sqrt(n)
        inside = max(margin - t_e * se, 0.0)  # equivalent: |mean| < inside
        beyond = t_d * se  # different: |mean| > beyond
        p_eq = 2 * st.norm.cdf(inside / sigma_mean) - 1
        p_diff = 2 * st.norm.sf(beyond / sigma_mean)
        p_both = max(0.0, 2 * (st.norm.cdf(inside / sigma_mean) - st.norm.cdf(beyond / sigma_mean)))
        return (p_eq + p_diff - p_both) * st.chi2.pdf(q, dof)
    return integrate.quad(given, 0, np.inf, limit=200)[0]


@pytest.mark.parametrize("n, sd, margin", [(16, 0.009, 0.01), (10, 0.02, 0.02), (6, 0.004, 0.01)])
def test_one_look_power_is_the_fixed_sample_tost_power(n, sd, margin):
    design = sq.Design((n,), ALPHA, ALPHA)
    want = fixed_sample_decision_probability(n, sd, margin, ALPHA)
    got = decisive_checks.power_at_cap(design, sd, margin, studies=40_000, seed=3)
    assert got == pytest.approx(want, abs=binomial_tolerance(want, 40_000))


def simulated_here(design: sq.Design, sd: float, margin: float, studies: int, seed: int) -> float:
    """P(a decision by the cap | difference 0): the stopping rule written out with numpy on the design's t
    boundaries (tested against Jennison & Turnbull's tables in test_sequential.py)."""
    bounds = sq.design_boundaries(design)
    x = np.random.default_rng(seed).normal(0.0, sd, size=(studies, design.cap))
    decided = np.zeros(studies, bool)
    for look in bounds.itertuples():
        d = x[:, :look.n_seeds]
        mean, se = d.mean(1), d.std(1, ddof=1) / np.sqrt(look.n_seeds)
        equivalent = (mean - look.t_equivalent * se > -margin) & (mean + look.t_equivalent * se < margin)
        different = np.abs(mean) > look.t_different * se
        decided |= equivalent | different
    return decided.mean()


@pytest.mark.parametrize("sd, margin", [(0.009, 0.01), (0.0108, 0.01), (0.028, 0.02)])
def test_the_power_follows_every_look_of_the_design(sd, margin):
    want = simulated_here(STUDY, sd, margin, 20_000, seed=11)
    got = decisive_checks.power_at_cap(STUDY, sd, margin, studies=20_000, seed=12)
    assert got == pytest.approx(want, abs=binomial_tolerance(want, 20_000, 20_000))


def test_the_power_falls_as_the_sd_grows_and_is_nan_without_an_sd():
    powers = [decisive_checks.power_at_cap(STUDY, sd, 0.01, studies=20_000) for sd in (0.006, 0.009, 0.012)]
    assert powers[0] > powers[1] > powers[2]
    assert np.isnan(decisive_checks.power_at_cap(STUDY, float("nan"), 0.01))


@pytest.mark.results
def test_the_committed_study_states_the_power_an_independent_simulation_found():
    """Issue 36's check (100,000 studies at difference 0): 0.82 at MRPC's planning sd, 0.91 at CoLA's; at the
    sds measured at the cap, per comparison, the numbers below."""
    study = repo_root() / "results" / "decisive"
    if not (study / "stats" / "verdicts.csv").is_file():
        pytest.skip("no committed decisive study")
    tables = decisive.read_outputs(study)
    if "power_at_cap" not in tables["verdicts"]:
        pytest.fail("results/decisive/stats/verdicts.csv has no power_at_cap: run `python -m typhoon decisive-tables results/decisive`")
    independent = {("mrpc", "whole_word - random"): 0.99, ("mrpc", "typhoon - random"): 0.77,
                   ("mrpc", "typhoon_softmax - random"): 0.997, ("mrpc", "typhoon_task - random"): 0.92,
                   ("mrpc", "typhoon - whole_word"): 0.52, ("cola", "whole_word - random"): 0.38,
                   ("cola", "typhoon - random"): 0.999, ("cola", "typhoon_softmax - random"): 0.14,
                   ("cola", "typhoon_task - random"): 0.99, ("cola", "typhoon - whole_word"): 0.49}
    got = tables["verdicts"].set_index(["task", "comparison"])["power_at_cap"].to_dict()
    assert got == pytest.approx(independent, abs=0.01)
    planning = tables["design"].drop_duplicates("task").set_index("task")["p_decided_at_0"]
    assert planning.to_dict() == pytest.approx({"mrpc": 0.82, "cola": 0.91}, abs=0.01)


# --------------------------------------------------------------------------------------------------
# Kernel families, from records


AMX_XEON = {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": True}
EPYC = {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": False}


def write_record(out, config, cpu, value=0.8):
    """A finished bf16 CPU record of ``config`` made on a machine with the CPU flags ``cpu`` (as older records
    store them: no ``numerics`` entry, the flags under ``hardware``)."""
    metrics = {"status": "ok", "primary_metric": "f1" if config.task == "mrpc" else "mcc", "precision": "bf16", "device": "cpu", "attention": "eager",
               "dropout": "fast", "hardware": {"cpu": cpu}, "final": {"dev_f1": value, "dev_mcc": value}}
    run_record.write_record(out / config.relative_dir(), config, metrics)


def test_numerics_of_records_tell_the_kernel_family_from_the_cpu_flags(tmp_path):
    configs = decisive.grid_configs(get_profile("decisive"))
    write_record(tmp_path, configs[("mrpc", "random", 0)], AMX_XEON)
    write_record(tmp_path, configs[("mrpc", "typhoon_task", 0)], EPYC)
    write_record(tmp_path, configs[("mrpc", "typhoon", 0)], {})  # an older record without its CPU's flags
    found = decisive.arm_numerics(configs, tmp_path)
    amx, avx = found[("mrpc", "random", 0)], found[("mrpc", "typhoon_task", 0)]
    assert (amx.label, amx.kernels, avx.label, avx.kernels) == ("bf16 on cpu", "amx", "bf16 on cpu", "avx512_bf16")
    assert amx.mixes_with(avx) and avx.mixes_with(amx) and not amx.mixes_with(amx)
    unknown = found[("mrpc", "typhoon", 0)]
    assert unknown.kernels == "unknown" and not unknown.mixes_with(amx)  # nothing says it differs
    fp32 = run_numerics.Numerics("fp32", "cpu", "unknown", "eager", "fast")
    assert fp32.mixes_with(unknown)  # another precision always mixes
    seeds = decisive.seed_numerics(configs, tmp_path)
    assert seeds["mixed"].tolist() == [True] and "(amx)" in seeds["numerics"].iloc[0]


def test_a_cell_is_not_trained_on_another_kernel_family_than_its_seeds_arms(tmp_path, monkeypatch):
    configs = decisive.grid_configs(get_profile("decisive"))
    write_record(tmp_path, configs[("mrpc", "random", 3)], AMX_XEON)
    here = {"family": "avx512_bf16"}
    monkeypatch.setattr(decisive, "numerics_here",  # where the seed check reads this machine's numerics
                        lambda config: run_numerics.Numerics("bf16", "cpu", here["family"], "eager", "fast"))
    with pytest.raises(ValueError, match=r"seed 3 of mrpc.*bf16 on cpu \(amx\).*avx512_bf16.*kernel family"):
        decisive.check_seed_numerics([configs[("mrpc", "typhoon", 3)]], configs, tmp_path)
    here["family"] = "amx"  # the machine the seed's arms ran on
    decisive.check_seed_numerics([configs[("mrpc", "typhoon", 3)]], configs, tmp_path)


def test_the_verdicts_flag_the_comparisons_whose_pairs_mix_kernel_families(tmp_path):
    """Seeds 0-2 of random on the AMX Xeon, every other record on the EPYC: only the comparisons with random
    whose other arm ran on the EPYC at those seeds are flagged, with seeds 0 1 2."""
    spec = get_profile("decisive")
    configs = decisive.grid_configs(spec)
    rng = np.random.default_rng(0)
    for (_, strategy, seed), config in configs.items():
        if seed < 6 and strategy in ("random", "typhoon_task", "typhoon"):
            on_xeon = seed < 3 and strategy in ("random", "typhoon")
            write_record(tmp_path, config, AMX_XEON if on_xeon else EPYC, 0.8 + rng.normal(0, 0.003))
    study = decisive_design.study_design(spec)
    results = decisive.results_table(configs, tmp_path)
    _, verdicts = decisive.analyse(results, study)
    table = decisive.with_checks(verdicts, results, study, decisive.arm_numerics(configs, tmp_path), studies=2_000)
    flagged = table.dropna(subset=["mixed_seeds"]).set_index(["task", "comparison"])
    assert sorted(flagged.index) == sorted((t, "typhoon_task - random") for t in ("mrpc", "cola"))
    assert (flagged["mixed_seeds"] == "0 1 2").all()
    assert flagged["mixed_kernels"].str.contains(r"typhoon_task bf16 on cpu \(avx512_bf16\) vs random bf16 on cpu \(amx\)").all()
    row = table.set_index(["task", "comparison"]).loc[("mrpc", "typhoon - random")]
    assert pd.isna(row.mixed_seeds) and pd.isna(row.verdict_without_mixed)  # both arms on the Xeon at 0-2
    assert row.power_sd_seeds == 6 and row.power_sd == pytest.approx(
        np.std(decisive.paired_differences(results, study, "mrpc")["typhoon - random"], ddof=1))


# --------------------------------------------------------------------------------------------------
# The verdict without the mixed seeds


def test_without_the_mixed_seeds_short_of_the_cap_the_design_looks_at_the_seeds_left():
    """13 seeds on record (short of the cap: more could be trained), seeds 0-2 dropped: the 10 left are
    judged at the design's look of 10 seeds, whose TOST interval is mean ± t_equivalent(10 seeds)·se."""
    rng = np.random.default_rng(4)
    values = np.concatenate([[0.05, -0.04, 0.06], rng.normal(0.001, 0.004, 10)])
    got = decisive_checks.verdict_without(values, [0, 1, 2], STUDY, 0.01)
    left = values[3:]
    t10 = sq.design_boundaries(STUDY).set_index("n_seeds").loc[10, "t_equivalent"]
    se = left.std(ddof=1) / np.sqrt(10)
    assert got["n_seeds_without_mixed"] == 10
    assert got["tost_low_without_mixed"] == pytest.approx(left.mean() - t10 * se)
    assert got["tost_high_without_mixed"] == pytest.approx(left.mean() + t10 * se)
    inside = -0.01 < left.mean() - t10 * se and left.mean() + t10 * se < 0.01
    assert got["verdict_without_mixed"] == ("equivalent" if inside else "continue")


def test_without_the_mixed_seeds_at_the_cap_the_last_look_spends_the_rest_of_the_error():
    """16 seeds on record (the cap), 3 dropped: the 13 left are all the comparison has, so its last look
    spends what is left of the error: its boundary lies between the fixed-sample TOST quantile at 0.005 (no
    earlier look spent anything) and the design's own boundary at 13 seeds (which keeps error for 16). The
    differences are made so that equivalence holds with the first and not with the second."""
    rng = np.random.default_rng(8)
    left = rng.normal(0.0, 1.0, 13)
    left = (left - left.mean()) / left.std(ddof=1) * 0.0078 - 0.0025  # mean -0.0025, sd 0.0078: as MRPC's
    values = np.concatenate([[0.03, 0.025, 0.035], left])
    got = decisive_checks.verdict_without(values, [0, 1, 2], STUDY, 0.01)
    se = left.std(ddof=1) / np.sqrt(13)
    t_used = (got["tost_high_without_mixed"] - got["tost_low_without_mixed"]) / (2 * se)
    t_fixed = st.t.isf(ALPHA, 12)
    t_look = sq.design_boundaries(STUDY).set_index("n_seeds").loc[13, "t_equivalent"]
    assert t_fixed < t_used < t_look
    assert got["n_seeds_without_mixed"] == 13 and got["verdict_without_mixed"] == "equivalent"
    assert -0.0025 - t_look * se < -0.01  # the design's 13-seed look would not have decided it
    # with the mixed seeds the verdict is another: they pull the mean up and widen the sd
    assert decisive_checks.verdict_without(values, [], STUDY, 0.01)["verdict_without_mixed"] == "undecided at cap"
