"""typhoon.analysis.output_tables and paper_claims: the headline table, the paper's claims judged from the
tables, and the README's Results block regenerated from the committed reference run (it must agree with the README)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from scipy import stats as st

from typhoon.analysis import output_tables, pairwise, paper_claims, run_summary, stats_tables
from typhoon.analysis.kl.budget_spread import PAPER_KL_NATS_PER_TOKEN
from typhoon.records import schema
from typhoon.report import results_readme
from typhoon.studies.grid import pages as grid_pages
from typhoon.studies.schedules import analysis as schedule_study
from typhoon.studies.schedules import pages as schedules_pages
from typhoon.studies.sequential import answer as readme_answer
from typhoon.studies.sequential import pages as sequential_pages

STRATEGIES = ("typhoon", "random", "whole_word")


CLAIMS, SCHEDULES, SEQUENTIAL = grid_pages.PAGES, schedules_pages.PAGES, sequential_pages.PAGES


def make_output(out, profile="cpu", shift=None, ww_loss=0.5, typhoon_gap=0.0, kl=PAPER_KL_NATS_PER_TOKEN,
                seeds=3, noise=0.01, seed_loss_sd=0.0, states=None):
    """An output folder as the grid and notebooks 20/30 leave it: results.csv, stats/summary.csv and
    comparisons.csv (computed by typhoon.analysis.pairwise), stats/budget_states.csv and each run's mlm_loss.csv.

    ``shift``: {strategy: added to its dev metric}; ``noise``: the sd of the dev metric between runs;
    ``ww_loss``: how much higher whole-word masking's MLM training loss is; ``typhoon_gap``: how far Typhoon's
    loss curve sits from random's; ``seed_loss_sd``: the sd of a seed's loss level, shared by the strategies
    (what pairing by seed removes); ``kl``: the states' KL; ``states``: the budget states table instead.
    """
    rng = np.random.default_rng(0)
    shift = shift or {}
    rows = []
    seed_level = rng.normal(0, seed_loss_sd, seeds) if seed_loss_sd else np.zeros(seeds)
    for task, metric in (("mrpc", "f1"), ("cola", "mcc")):
        for strategy in STRATEGIES:
            for seed in range(seeds):
                record_path = f"runs/{task}/minilm-l6/{strategy}/seed{seed}"
                rows.append(dict(task=task, backbone="minilm-l6", strategy=strategy, schedule="fixed", seed=seed,
                                 profile=profile,
                                 status="ok", primary_metric=metric, majority_value=0.5, precision="bf16",
                                 device="cpu", wall_s=60.0, record_path=record_path,
                                 primary_value=0.8 + shift.get(strategy, 0.0) + rng.normal(0, noise),
                                 calibration="minmax" if strategy == "typhoon" else None,
                                 saliency="mlm" if strategy == "typhoon" else None))
                steps = np.arange(1, 51)
                base = 5 + seed_level[seed] - 0.02 * steps + rng.normal(0, 0.005, steps.size)
                loss = base + (ww_loss if strategy == "whole_word" else 0) + (typhoon_gap if strategy == "typhoon" else 0)
                frame = pd.DataFrame({"step": steps, "epoch": 1, "split": "train", "loss": loss})
                dev = pd.DataFrame({"step": [50], "epoch": [1], "split": ["dev"], "loss": [4.0]})
                (out / record_path).mkdir(parents=True)
                pd.concat([frame, dev]).to_csv(out / record_path / "mlm_loss.csv", index=False)
    results = pd.DataFrame(rows).reindex(columns=schema.RESULT_COLUMNS)
    results.to_csv(out / "results.csv", index=False)
    comparisons = pairwise.paired_comparisons(results, aso_iterations=50, bootstrap_resamples=200)
    stats_tables.write_tables({"summary": run_summary.summarize(results), "comparisons": comparisons}, out / "stats")
    if states is None:
        runs = [(task, seed) for task in ("mrpc", "cola") for seed in range(seeds)]
        states = pd.DataFrame({"task": [t for t, _ in runs], "backbone": "minilm-l6", "strategy": "typhoon",
                               "seed": [s for _, s in runs], "p": 0.15, "delta": 0.4, "calibration": "minmax",
                               "kl_to_uniform": kl * np.exp(rng.normal(0, 0.1, len(runs)))})
    states.to_csv(out / "stats" / "budget_states.csv", index=False)
    if not (out / "MANIFEST.json").exists():  # a reproduce's folder names its profile (results-readme reads it)
        (out / "MANIFEST.json").write_text(json.dumps({"profile": profile}))
    return output_tables.read_tables(out)


def verdicts(tables) -> dict[str, str]:
    table = paper_claims.claims_table(tables)
    return dict(zip(table["claim"].str.split().str[:2].str.join(" "), table["verdict"], strict=True))


def test_the_null_result_is_judged_reproduced_claim_by_claim(tmp_path):
    tables = make_output(tmp_path)
    claims = paper_claims.claims_table(tables)
    assert list(claims.columns) == ["claim", "paper", "runs", "criterion", "this run", "verdict"] and len(claims) == 6
    got = verdicts(tables)
    # at 3 seeds a paired t-test sees a medium effect (dz 0.5) with a power of 0.08: "none significant" was
    # near certain whatever the truth, so it is consistent with the paper and no more, the power stated
    assert got["No significant"] == got["Every 95"] == paper_claims.CONSISTENT == "consistent at low power"
    assert got["Whole-word masking"] == got["Random and"] == "reproduced"
    assert got["Typhoon's masking"] == "reproduced"  # KL = the paper's
    # the figures are the tables' numbers
    c = tables.vs_reference
    row = claims.set_index("verdict").loc[paper_claims.CONSISTENT].iloc[0]
    assert f"of {len(c)} significant" in row["this run"]
    assert row["this run"].endswith("consistent with no difference, but at a power of 0.08 (paired t, 3 seeds, "
                                    "dz 0.5) this says little")
    headline = paper_claims.headline(tables)
    assert "2 consistent at low power" in headline and "at a power of 0.08 (paired t, 3 seeds, dz 0.5)" in headline
    for r in c[c["task"] == "mrpc"].itertuples():  # the MRPC claim shows each paired CI of comparisons.csv
        assert f"{r.mean_diff:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}]" in claims.loc[2, "this run"]
    assert claims.loc[2, "verdict"] in ("reproduced", "contradicted", "not decided")


def test_no_significant_difference_is_reproduced_only_with_the_power_to_see_one(tmp_path):
    """statsmodels: a two-sided paired t at alpha 0.05 reaches a power of 0.8 against dz 0.5 at 34 pairs;
    at 34 seeds "none significant" is reproduced, its figure without a power caveat."""
    from statsmodels.stats.power import TTestPower

    assert TTestPower().power(effect_size=0.5, nobs=33, alpha=0.05) < 0.8 <= TTestPower().power(effect_size=0.5, nobs=34, alpha=0.05)
    got = verdicts(make_output(tmp_path / "a", seeds=34))
    assert got["No significant"] == got["Every 95"] == "reproduced"
    few = paper_claims.claims_table(make_output(tmp_path / "b", seeds=5)).iloc[0]
    assert few["verdict"] == paper_claims.CONSISTENT and "a power of 0.14 (paired t, 5 seeds, dz 0.5)" in few["this run"]


def test_claims_that_do_not_hold_are_not_reproduced(tmp_path):
    tables = make_output(tmp_path, shift={"typhoon": 0.08}, ww_loss=-0.5, typhoon_gap=1.0,
                         kl=10 * PAPER_KL_NATS_PER_TOKEN)
    got = verdicts(tables)
    assert got["No significant"] == got["Every 95"] == got["On MRPC,"] == "contradicted"
    assert got["Whole-word masking"] == got["Random and"] == got["Typhoon's masking"] == "contradicted"
    assert "2 of 2" not in paper_claims.headline(tables) and "significant after Holm" in paper_claims.headline(tables)


def test_a_pipeline_check_is_never_judged(tmp_path):
    tables = make_output(tmp_path, profile="smoke")
    claims = paper_claims.claims_table(tables)
    assert (claims["verdict"] == "not comparable").all() and claims["this run"].str.contains("pipeline check").all()
    assert "not findings" in paper_claims.headline(tables) and "reproduced" not in paper_claims.headline(tables)


def test_the_kl_claim_needs_the_papers_calibration(tmp_path):
    tables = make_output(tmp_path)
    tables.budget_states["delta"] = 1.0
    claims = paper_claims.claims_table(tables)
    assert claims.iloc[-1]["verdict"] == "not comparable" and "delta" in claims.iloc[-1]["this run"]


def test_the_headline_table_shows_the_summary_and_the_comparisons(tmp_path):
    tables = make_output(tmp_path)
    table = output_tables.headline_table(tables)
    assert len(table) == len(tables.summary) == 6
    for row, (_, s) in zip(table.itertuples(index=False), tables.summary.iterrows(), strict=True):
        mean, sd = (float(x) for x in row[5].split(" ± "))
        assert mean == pytest.approx(s["mean"], abs=5e-4) and sd == pytest.approx(s["sd"], abs=5e-4)
    other = table[table["strategy"] != "typhoon"].iloc[0]
    c = tables.vs_reference.iloc[0]
    diff, low, high = (float(x) for x in re.findall(r"[-+]\d\.\d+", other["typhoon − strategy [95 % CI]"]))
    assert (diff, low, high) == pytest.approx((c["mean_diff"], c["ci_low"], c["ci_high"]), abs=5e-4)
    assert other["verdict"] == c["verdict"]
    assert (table[table["strategy"] == "typhoon"]["verdict"] == "reference").all()


def test_readme_block_is_rewritten_in_place(tmp_path):
    make_output(tmp_path / "ref")
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## Results\n\n{grid_pages.README_BEGIN}\nold\n{grid_pages.README_END}\n\n## After\n")
    assert results_readme.update_readme(tmp_path / "ref", readme, check=True, pages=CLAIMS)
    assert "old" in readme.read_text()  # check: nothing written
    assert results_readme.update_readme(tmp_path / "ref", readme, pages=CLAIMS)
    text = readme.read_text()
    assert text.startswith("# x\n\n## Results\n\n") and text.endswith("\n\n## After\n") and "old" not in text
    assert "(ref/figures/paired_differences.png)" not in text  # no figure in this folder: no broken link
    assert "[`ref/report.html`](ref/report.html)" in text
    assert not results_readme.update_readme(tmp_path / "ref", readme, pages=CLAIMS)  # up to date now
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="has no block for"):
        results_readme.update_readme(tmp_path / "ref", readme, pages=CLAIMS)


def test_a_reference_run_with_its_own_markers_updates_its_own_block(tmp_path):
    """Two reference runs of one profile (results/cpu and results/cpu-mlm): the one whose folder has its own
    markers on the page writes there and leaves the Results block alone; the other still writes the Results block."""
    make_output(tmp_path / "cpu")
    make_output(tmp_path / "cpu-mlm", shift={"random": 0.01})
    begin, end = results_readme.own_markers(tmp_path / "cpu-mlm")
    assert (begin, end) == ("<!-- results:cpu-mlm:begin -->", "<!-- results:cpu-mlm:end -->")
    readme = tmp_path / "results.md"
    readme.write_text(f"{grid_pages.README_BEGIN}\nold cpu\n{grid_pages.README_END}\n{begin}\nold mlm\n{end}\n")
    assert results_readme.update_readme(tmp_path / "cpu-mlm", readme, pages=CLAIMS)
    text = readme.read_text()
    assert "old cpu" in text and "old mlm" not in text and "(`cpu-mlm/`)" in text.split(begin)[1]
    assert results_readme.update_readme(tmp_path / "cpu", readme, pages=CLAIMS)
    text = readme.read_text()
    assert "old cpu" not in text and text.count("(`cpu/`)") == 1 and text.index("(`cpu/`)") < text.index(begin)


def test_a_folder_of_reused_records_names_the_cpus_its_records_were_trained_on(tmp_path):
    """Nothing trained in the folder (every record reused, as results/cpu-mlm's): its provenance line names
    each CPU its records' metrics.json names, once, with the flags that decide the precision; a manifest that
    trained cells names its machine instead, with "1 core" for one."""
    import json

    out = tmp_path / "cpu-mlm"
    make_output(out)
    records = sorted((out / "runs").glob("*/*/*/seed*"))
    for n, run_dir in enumerate(records):
        cpu = ({"model": "AMD EPYC", "avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": False} if n % 2
               else {"model": "Intel Xeon", "avx2": True, "amx_bf16": True, "amx_tile": True})
        (run_dir / "metrics.json").write_text(json.dumps({"status": "ok", "hardware": {"cpu": cpu}}))
    (out / "MANIFEST.json").write_text(json.dumps({"profile": "cpu", "machine": {
        "cpu": "Intel Xeon", "cores": 1, "cpu_features": ["avx2"], "memory_gib": 24.0}}))
    block = results_readme.readme_block(out, tmp_path / "results.md", CLAIMS)
    assert ("records trained on Intel Xeon (avx2, amx_bf16, amx_tile); records trained on AMD EPYC "
            "(avx2, avx512f, avx512_bf16); tables made on Intel Xeon, 1 core (avx2); 24 GiB") in block
    (out / "MANIFEST.json").write_text(json.dumps({"profile": "cpu", "cells": {"ok": 18}, "machine": {
        "cpu": "Intel Xeon", "cores": 2, "cpu_features": ["avx2"]}}))
    block = results_readme.readme_block(out, tmp_path / "results.md", CLAIMS)
    assert "trained on Intel Xeon, 2 cores (avx2)" in block and "records trained on" not in block


@pytest.mark.results
def test_the_readme_results_agree_with_the_committed_reference_run():
    """docs/results.md's Results block is what `python -m typhoon results-readme results/cpu` makes from the
    committed tables: a number changed in either place fails here."""
    reference = REPO / "results" / "cpu"
    if not (reference / "results.csv").is_file():
        pytest.skip("no committed reference run in results/cpu yet (made last, by "
                    "`python -m typhoon reproduce --profile cpu --out results/cpu`)")
    readme = REPO / results_readme.RESULTS_PAGE
    assert results_readme.readme_block_in(readme, grid_pages.README_BEGIN, grid_pages.README_END) == results_readme.readme_block(reference, readme, CLAIMS), \
        "docs/results.md's Results block is out of date: run `python -m typhoon results-readme results/cpu`"


@pytest.mark.results
def test_the_results_page_block_of_the_mlm_reference_run_agrees_with_it():
    """docs/results.md's results/cpu-mlm block is what `results-readme results/cpu-mlm` makes from its tables."""
    reference = REPO / "results" / "cpu-mlm"
    if not (reference / "results.csv").is_file():
        pytest.skip("no committed cpu reference run on minilm-l6-mlm yet (results/cpu-mlm)")
    readme = REPO / results_readme.RESULTS_PAGE
    begin, end = results_readme.own_markers(reference)
    assert results_readme.readme_block_in(readme, begin, end) == \
        results_readme.readme_block(reference, readme, CLAIMS), \
        "docs/results.md's cpu-mlm block is out of date: run `python -m typhoon results-readme results/cpu-mlm`"


def sequential_folder(out):
    """A copy of the committed decisive study's tables (stats/*.csv and results.csv), without its figure."""
    source = REPO / "results" / "decisive"
    if not (source / "stats" / "verdicts.csv").is_file():
        pytest.skip("no committed decisive study in results/decisive yet")
    (out / "stats").mkdir(parents=True)
    for path in (source / "stats").glob("*.csv"):
        (out / "stats" / path.name).write_bytes(path.read_bytes())
    (out / "results.csv").write_bytes((source / "results.csv").read_bytes())
    return out


def rewritten_block(study, readme, begin: str, end: str, pages) -> tuple[str, list[list[str]]]:
    """``study``'s block written into a README that holds a cpu Results block and an outdated block between
    ``begin`` and ``end``: the new block (the cpu block untouched) and its table rows split into cells."""
    readme.write_text(f"{grid_pages.README_BEGIN}\ncpu\n{grid_pages.README_END}\n{begin}\nold\n{end}\n")
    assert results_readme.update_readme(study, readme, pages=pages)
    text = readme.read_text()
    assert "\ncpu\n" in text and "old" not in text  # the other block untouched
    block = results_readme.readme_block_in(readme, begin, end)
    return block, [line.split(" | ") for line in block.splitlines() if line.startswith(("| mrpc", "| cola"))]


def test_a_sequential_study_gets_its_own_block_with_its_verdicts(tmp_path):
    study = sequential_folder(tmp_path / "study")
    verdicts = pd.read_csv(study / "stats" / "verdicts.csv")
    # one comparison decided, the others open (whatever the committed study has reached): the block
    # must count it and say the others continue
    verdicts["verdict"], verdicts["next_look_seeds"] = "continue", 16.0
    verdicts.loc[verdicts.index[-1], ["verdict", "next_look_seeds"]] = ["equivalent", np.nan]
    # the power at the measured sd: one comparison below the registered 0.8; one comparison's pairs mixed
    verdicts["power_at_cap"], verdicts["power_sd"] = 0.95, 0.01
    verdicts.loc[verdicts.index[1], ["power_at_cap", "power_sd"]] = [0.5, 0.02]
    verdicts["mixed_seeds"], verdicts["mixed_kernels"], verdicts["verdict_without_mixed"] = None, None, None
    verdicts.loc[verdicts.index[3], ["mixed_seeds", "mixed_kernels", "n_seeds_without_mixed", "tost_low_without_mixed",
                                     "tost_high_without_mixed", "verdict_without_mixed"]] = \
        ["0 1 2", "a (amx) vs b (avx512_bf16)", 10, -0.03, 0.02, "continue"]
    verdicts.to_csv(study / "stats" / "verdicts.csv", index=False)
    readme = tmp_path / "README.md"
    block, rows = rewritten_block(study, readme, sequential_pages.DECISIVE_BEGIN, sequential_pages.DECISIVE_END, SEQUENTIAL)
    header = next(line for line in block.splitlines() if line.startswith("| task")).strip("| ").split(" | ")
    rows = [dict(zip(header, [r[0][2:], *r[1:-1], r[-1][:-2]], strict=True)) for r in rows]
    assert [(r["task"], r["comparison"], int(r["seeds"]), r["verdict"]) for r in rows] == \
        [(v.task, v.comparison, int(v.n_seeds), v.verdict) for v in verdicts.itertuples()]
    assert [r["power at cap (measured sd)"] for r in rows] == ["0.95", "0.50"] + ["0.95"] * (len(rows) - 2)
    assert [(r["mixed kernels"], r["verdict without them"]) for r in rows if r["mixed kernels"]] == [("seeds 0–2", "continue")]
    weak, mixed = verdicts.iloc[1], verdicts.iloc[3]
    assert f"1 of {len(verdicts)} comparisons fall below 0.8: {weak.task} {weak.comparison} 0.50 (sd 0.0200)" in block
    assert "at the planning sds" in block and "`power_at_cap`" in block
    assert (f"{mixed.task} {mixed.comparison} at seeds 0–2 (a (amx) vs b (avx512_bf16)): without them not decided (the design would continue with more seeds), "
            "TOST [-0.0300, +0.0200] on the 10 seeds left") in block
    last = verdicts.iloc[-1]
    assert f"{len(verdicts) - 1} of {len(verdicts)} comparisons continue" in block
    assert f"{last.task} (margin ±{last.margin:g}" in block and "1 equivalent" in block
    assert "decisive_looks.png" not in block  # no figure in this folder: no broken link
    readme.write_text(f"{grid_pages.README_BEGIN}\ncpu\n{grid_pages.README_END}\n")
    with pytest.raises(ValueError, match="has no block for"):
        results_readme.update_readme(study, readme, pages=SEQUENTIAL)


@pytest.mark.results
@pytest.mark.parametrize("folder, markers", [
    ("decisive", (sequential_pages.DECISIVE_BEGIN, sequential_pages.DECISIVE_END)),
    ("decisive-mlm", ("<!-- decisive:decisive-mlm:begin -->", "<!-- decisive:decisive-mlm:end -->"))])
def test_the_readme_decisive_blocks_agree_with_the_committed_studies(folder, markers):
    """docs/results.md's block of each sequential study is what `python -m typhoon results-readme
    results/<folder>` makes, between the markers written here by hand (a study in progress included)."""
    study = REPO / "results" / folder
    if not (study / "stats" / "verdicts.csv").is_file():
        pytest.skip(f"no committed sequential study in results/{folder} yet")
    readme = REPO / results_readme.RESULTS_PAGE
    block = results_readme.readme_block_in(readme, *markers)
    assert block is not None, f"docs/results.md has no {markers[0]} block"
    assert block == results_readme.readme_block(study, readme, SEQUENTIAL), \
        f"docs/results.md's {folder} block is out of date: run `python -m typhoon results-readme results/{folder}`"


def test_a_design_planned_per_comparison_names_the_comparisons_its_cap_leaves_short(tmp_path):
    """A study in progress whose design planned each comparison at its own sd (as decisive-mlm does): the block
    says so, counts the comparisons the simulation puts at >= 0.8 and names the others with their probability,
    and says from how few seeds the measured sds come."""
    study = sequential_folder(tmp_path / "study")
    design = pd.read_csv(study / "stats" / "design.csv")
    design["planning_sd"] = np.linspace(0.005, 0.03, len(design))
    design["p_decided_at_0"] = 0.95
    design.loc[design.index[[2, 7]], "p_decided_at_0"] = [0.61, 0.49]
    design.to_csv(study / "stats" / "design.csv", index=False)
    verdicts = pd.read_csv(study / "stats" / "verdicts.csv")
    verdicts["verdict"], verdicts["next_look_seeds"] = "continue", 6.0
    verdicts["power_at_cap"], verdicts["power_sd"], verdicts["power_sd_seeds"] = 0.9, 0.01, 3
    verdicts.to_csv(study / "stats" / "verdicts.csv", index=False)
    block, _ = rewritten_block(study, tmp_path / "README.md", sequential_pages.DECISIVE_BEGIN, sequential_pages.DECISIVE_END,
                               SEQUENTIAL)
    a, b = design.iloc[2], design.iloc[7]
    assert block.splitlines()[1].startswith("**The decisive study so far**")
    assert (f"at the planning sds, one per comparison (`stats/design.csv`), {len(design) - 2} of {len(design)} "
            f"comparisons reach the ≥ 0.8 the cap was chosen for ({a.task} {a.comparison} 0.61 (sd {a.planning_sd:.4f}); "
            f"{b.task} {b.comparison} 0.49 (sd {b.planning_sd:.4f}))") in block
    assert "3 seeds so far, a rough estimate) 0 of" in block


def schedule_folder(out):
    """A schedules grid's folder: a made output (fixed random, typhoon, whole_word) plus random under uniform
    and mixture (a full-mask loss 1 nat lower under mixture), analysed as notebook 40's last section does."""
    make_output(out, profile="schedules")
    results = pd.read_csv(out / "results.csv")
    rng = np.random.default_rng(5)
    fixed = results[results["strategy"] == "random"].assign(mlm_full_mask_loss=7.0 + rng.normal(0, 0.02, 6))
    runs = [results[results["strategy"] != "random"], fixed]
    for schedule, shift in (("uniform", -0.3), ("mixture", -1.0)):
        runs.append(fixed.assign(schedule=schedule, primary_value=fixed["primary_value"] + rng.normal(0, 0.01, 6),
                                 mlm_full_mask_loss=fixed["mlm_full_mask_loss"] + shift + rng.normal(0, 0.02, 6)))
    pd.concat(runs).to_csv(out / "results.csv", index=False)
    schedule_study.study_of_folder(out)
    return out


def test_a_schedules_grid_gets_its_own_block_with_its_comparisons(tmp_path):
    study = schedule_folder(tmp_path / "study")
    table = schedule_study.read_table(study)
    readme = tmp_path / "README.md"
    block, rows = rewritten_block(study, readme, schedules_pages.SCHEDULES_BEGIN, schedules_pages.SCHEDULES_END, SCHEDULES)
    assert [(r[0][2:], r[1], r[2], r[6]) for r in rows] == \
        [(t.task, t.strategy, f"{t.schedule} − fixed", t.outcome) for t in table.itertuples()]
    assert f"**{schedule_study.headline(table)}**" in block and "seen in 4 of 4" in block
    assert "schedules_vs_fixed.png" not in block  # no figure in this folder: no broken link
    assert not results_readme.update_readme(study, readme, pages=SCHEDULES)  # regenerated: nothing changes


@pytest.mark.results
def test_the_readme_schedules_block_agrees_with_the_committed_study():
    """docs/results.md's schedules block is what `python -m typhoon results-readme results/schedules` makes."""
    study = REPO / "results" / "schedules"
    if not schedule_study.is_schedule_study(study):
        pytest.skip("no committed schedules grid in results/schedules yet")
    readme = REPO / results_readme.RESULTS_PAGE
    block = results_readme.readme_block_in(readme, schedules_pages.SCHEDULES_BEGIN, schedules_pages.SCHEDULES_END)
    assert block == results_readme.readme_block(study, readme, SCHEDULES), \
        "docs/results.md's schedules block is out of date: run `python -m typhoon results-readme results/schedules`"


def test_the_results_readme_command(tmp_path, capsys):
    from typhoon.cli import main

    make_output(tmp_path / "ref")
    readme = tmp_path / "README.md"
    readme.write_text(f"{grid_pages.README_BEGIN}\nold\n{grid_pages.README_END}\n")
    assert main(["results-readme", str(tmp_path / "ref"), "--readme", str(readme), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out and "old" in readme.read_text()
    assert main(["results-readme", str(tmp_path / "ref"), "--readme", str(readme)]) == 0
    assert main(["results-readme", str(tmp_path / "ref"), "--readme", str(readme), "--check"]) == 0
    assert main(["results-readme", str(tmp_path / "missing"), "--readme", str(readme)]) == 2
    assert "not a finished run of the study" in capsys.readouterr().err


def answer_rows(readme: Path) -> list[list[str]]:
    block = results_readme.readme_block_in(readme, readme_answer.ANSWER_BEGIN, readme_answer.ANSWER_END)
    assert block, f"{readme} has no answer table"
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines() if line.startswith("| ")]


def test_the_readme_answer_table_is_each_decisive_studys_verdicts(tmp_path, capsys):
    """The README's first table, rebuilt from a copied decisive study (minilm-l6) and an empty folder for the
    study on minilm-l6-mlm: every comparison of the design, each verdict and difference read back from the
    verdicts CSV by hand, the study without a look saying so."""
    from typhoon.cli import main

    sequential_folder(tmp_path / "results" / "decisive")
    (tmp_path / "results" / "decisive-mlm").mkdir(parents=True)
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{readme_answer.ANSWER_BEGIN}\nold\n{readme_answer.ANSWER_END}\n")
    assert main(["results-readme", "--answer", "--readme", str(readme), "--check"]) == 1
    assert main(["results-readme", "--answer", "--readme", str(readme)]) == 0
    header, *rows = answer_rows(readme)
    assert header == ["task", "comparison", "margin", "minilm-l6-mlm (0 records, no look yet)", "minilm-l6 (13–16 seeds)"]
    verdicts = pd.read_csv(tmp_path / "results" / "decisive" / "stats" / "verdicts.csv", dtype={"mixed_seeds": str})
    assert len(rows) == len(verdicts) == 10
    # a verdict that its mixed-numerics seeds decide (another verdict without them) is marked, with a note
    resting = [r for r in verdicts.itertuples() if isinstance(r.mixed_seeds, str) and r.verdict_without_mixed != r.verdict]
    for row, want in zip(rows, verdicts.itertuples(), strict=True):
        assert row[:3] == [want.task, want.comparison, f"±{want.margin:g}"]
        mark = readme_answer.MIXED_MARK if want.Index in {r.Index for r in resting} else ""
        assert row[3] == "" and row[4] == f"{want.verdict} ({round(want.difference, 4):+.4f}){mark}"
    block = results_readme.readme_block_in(readme, readme_answer.ANSWER_BEGIN, readme_answer.ANSWER_END)
    notes = [line for line in block.splitlines() if line.startswith(readme_answer.MIXED_MARK)]
    assert len(notes) == len(resting)
    for note, want in zip(notes, resting, strict=True):
        assert f"{want.task} {want.comparison}: {want.verdict} only with its seeds" in note
        assert f"the verdict is “{want.verdict_without_mixed}”" in note
        assert f"on the {int(want.n_seeds_without_mixed)} seeds left" in note
    assert main(["results-readme", "--answer", "--readme", str(readme), "--check"]) == 0
    assert main(["results-readme", str(tmp_path), "--answer", "--readme", str(readme)]) == 2  # one or the other
    assert "not both" in capsys.readouterr().err


def test_the_readme_answer_table_agrees_with_the_committed_studies():
    """README.md's answer table is what `python -m typhoon results-readme --answer` makes from results/."""
    assert not readme_answer.update_answer(REPO / "README.md", check=True), \
        "README.md's answer table is out of date: run `python -m typhoon results-readme --answer`"


# --------------------------------------------------------------------------------------------------
# Each claim from the runs it is about, judged by its interval (issue 23, defects 1 and 2)


def _states(kls: dict[tuple[str, int], tuple[str, float]]) -> pd.DataFrame:
    """Budget states: {(task, seed): (calibration, kl)} for the typhoon runs."""
    return pd.DataFrame([dict(task=t, backbone="minilm-l6", strategy="typhoon", seed=s, p=0.15, delta=0.4,
                              calibration=cal, kl_to_uniform=kl) for (t, s), (cal, kl) in kls.items()])


def test_the_kl_claim_reads_only_states_at_the_papers_calibration(tmp_path):
    """The first state is min-max (the old check looked at it only) and the rank states' KL is ~the paper's:
    pooled, the median would look reproduced; at min-max, δ 0.4 alone the KL is 30x smaller."""
    kls = {("mrpc", 0): ("minmax", 2.0e-5), ("mrpc", 1): ("minmax", 2.5e-5), ("mrpc", 2): ("minmax", 3.0e-5),
           ("cola", 0): ("rank", 1.0e-3), ("cola", 1): ("rank", 0.9e-3), ("cola", 2): ("rank", 1.1e-3)}
    tables = make_output(tmp_path, states=_states(kls))
    kl = paper_claims.claims_table(tables).iloc[-1]
    assert kl["verdict"] == "contradicted"
    assert "3 states" in kl["this run"] and "typhoon (min-max" in kl["runs"] and "mrpc" in kl["runs"]
    log = np.log([2.0e-5, 2.5e-5, 3.0e-5])
    half = st.t.ppf(0.975, 2) * log.std(ddof=1) / np.sqrt(3)
    assert f"[95 % CI {np.exp(log.mean() - half):.2e}, {np.exp(log.mean() + half):.2e}]" in kl["this run"]
    assert "factor of 3" in kl["criterion"]


def test_the_kl_claim_has_three_outcomes(tmp_path):
    near = {(t, s): ("minmax", PAPER_KL_NATS_PER_TOKEN * f) for t in ("mrpc", "cola")
            for s, f in enumerate((0.8, 1.0, 1.25))}
    assert paper_claims.claims_table(make_output(tmp_path / "a", states=_states(near))).iloc[-1]["verdict"] == "reproduced"
    wide = {(t, s): ("minmax", PAPER_KL_NATS_PER_TOKEN * f) for t, s, f in
            (("mrpc", 0, 0.01), ("mrpc", 1, 1.0), ("cola", 0, 30.0))}  # the interval straddles the factor of 3
    assert paper_claims.claims_table(make_output(tmp_path / "b", states=_states(wide))).iloc[-1]["verdict"] == "not decided"


def test_the_mrpc_gap_is_judged_by_its_paired_interval(tmp_path):
    """A point estimate inside ±0.004 with a wide CI is not decided (the old check called it reproduced)."""
    noisy = make_output(tmp_path / "noisy", noise=0.03)
    c = noisy.vs_reference[noisy.vs_reference["task"] == "mrpc"]
    claim = paper_claims.claims_table(noisy).iloc[2]
    straddles = ((c["ci_low"] < -0.004) | (c["ci_high"] > 0.004)) & (c["ci_high"] > -0.004) & (c["ci_low"] < 0.004)
    assert straddles.all() and claim["verdict"] == "not decided"
    tight = paper_claims.claims_table(make_output(tmp_path / "tight", noise=0.0002)).iloc[2]
    assert tight["verdict"] == "reproduced"
    far = paper_claims.claims_table(make_output(tmp_path / "far", noise=0.001, shift={"typhoon": 0.02})).iloc[2]
    assert far["verdict"] == "contradicted"
    assert "inside ±0.004" in claim["criterion"] and "mrpc" in claim["runs"] and "cola" not in claim["runs"]


def test_the_loss_claims_are_paired_by_seed(tmp_path):
    """Typhoon's loss 0.2 above random's in every seed, seeds 1.0 apart: the unpaired sd hid it (the old check
    said "nearly identical"); paired, the difference lies outside ±1 % of the loss."""
    tables = make_output(tmp_path, typhoon_gap=0.2, seed_loss_sd=1.0, ww_loss=0.0)
    claims = paper_claims.claims_table(tables).set_index("claim")
    curves = claims.loc["Random and Typhoon MLM loss curves are nearly identical"]
    assert curves["verdict"] == "contradicted" and "higher in 3 of 3 seeds" in curves["this run"]
    losses = tables.losses.pivot_table(index=["task", "seed"], columns="strategy", values="train_loss")
    d = (losses["typhoon"] - losses["random"]).loc["mrpc"].to_numpy()
    lo, hi = st.t.interval(0.95, 2, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(3))
    assert f"typhoon − random {d.mean():+.3f} [{lo:+.3f}, {hi:+.3f}]" in curves["this run"]
    # whole-word's loss sits 0.2 below Typhoon's in every seed: paired, that is not "higher"
    assert claims.loc["Whole-word masking has a higher MLM loss", "verdict"] == "contradicted"


def test_claims_leave_out_runs_that_are_not_the_papers(tmp_path):
    tables = make_output(tmp_path)
    extra = tables.results[tables.results["strategy"] == "typhoon"].assign(strategy="typhoon_rank",
                                                                           calibration="rank", primary_value=0.1)
    tables.results = pd.concat([tables.results, extra], ignore_index=True)
    claims = paper_claims.claims_table(tables)
    assert claims.iloc[0]["runs"].endswith("left out: typhoon_rank (not the paper's strategies)")
    assert claims.iloc[0]["verdict"] == paper_claims.CONSISTENT  # not contradicted: typhoon_rank's far lower scores are not compared
