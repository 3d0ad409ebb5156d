"""typhoon.findings: the headline table, the paper's claims judged from the tables, and the README's
Results block regenerated from the committed reference run (it must agree with the README)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from typhoon import findings, records, stats
from typhoon.budget_spread import PAPER_KL_NATS_PER_TOKEN

STRATEGIES = ("typhoon", "random", "whole_word")


def make_output(out, profile="cpu", shift=None, ww_loss=0.5, typhoon_gap=0.0, kl=PAPER_KL_NATS_PER_TOKEN,
                seeds=3):
    """An output folder as the grid and notebooks 20/30 leave it: results.csv, stats/summary.csv and
    comparisons.csv (computed by typhoon.stats), stats/budget_states.csv and each run's mlm_loss.csv.

    ``shift``: {strategy: added to its dev metric}; ``ww_loss``: how much higher whole-word masking's MLM
    training loss is; ``typhoon_gap``: how far Typhoon's loss curve sits from random's; ``kl``: the states' KL.
    """
    rng = np.random.default_rng(0)
    shift = shift or {}
    rows = []
    for task, metric in (("mrpc", "f1"), ("cola", "mcc")):
        for strategy in STRATEGIES:
            for seed in range(seeds):
                record_path = f"runs/{task}/minilm-l6/{strategy}/seed{seed}"
                rows.append(dict(task=task, backbone="minilm-l6", strategy=strategy, seed=seed, profile=profile,
                                 status="ok", primary_metric=metric, majority_value=0.5, precision="bf16",
                                 device="cpu", wall_s=60.0, record_path=record_path,
                                 primary_value=0.8 + shift.get(strategy, 0.0) + rng.normal(0, 0.01)))
                steps = np.arange(1, 51)
                base = 5 - 0.02 * steps + rng.normal(0, 0.05, steps.size)
                loss = base + (ww_loss if strategy == "whole_word" else 0) + (typhoon_gap if strategy == "typhoon" else 0)
                frame = pd.DataFrame({"step": steps, "epoch": 1, "split": "train", "loss": loss})
                dev = pd.DataFrame({"step": [50], "epoch": [1], "split": ["dev"], "loss": [4.0]})
                (out / record_path).mkdir(parents=True)
                pd.concat([frame, dev]).to_csv(out / record_path / "mlm_loss.csv", index=False)
    results = pd.DataFrame(rows).reindex(columns=records.RESULT_COLUMNS)
    results.to_csv(out / "results.csv", index=False)
    comparisons = stats.paired_comparisons(results, aso_iterations=50, bootstrap_resamples=200)
    stats.write_tables({"summary": stats.summarize(results), "comparisons": comparisons}, out / "stats")
    states = pd.DataFrame({"task": ["mrpc", "cola"], "backbone": "minilm-l6", "strategy": "typhoon", "seed": 0,
                           "p": 0.15, "delta": 0.4, "calibration": "minmax", "kl_to_uniform": [kl, kl]})
    states.to_csv(out / "stats" / "budget_states.csv", index=False)
    return findings.read_tables(out)


def verdicts(tables) -> dict[str, str]:
    table = findings.claims_table(tables)
    return dict(zip(table["claim"].str.split().str[:2].str.join(" "), table["verdict"], strict=True))


def test_the_null_result_is_judged_reproduced_claim_by_claim(tmp_path):
    tables = make_output(tmp_path)
    claims = findings.claims_table(tables)
    assert list(claims.columns) == ["claim", "paper", "this run", "verdict", "how"] and len(claims) == 6
    got = verdicts(tables)
    assert got["No significant"] == got["Every 95"] == "reproduced"
    assert got["Whole-word masking"] == got["Random and"] == "reproduced"
    assert got["Typhoon's masking"] == "reproduced"  # KL = the paper's
    # the figures are the tables' numbers
    c = tables.vs_reference
    row = claims.set_index("verdict").loc["reproduced"].iloc[0]
    assert f"of {len(c)} significant" in row["this run"]
    mrpc = c[c["task"] == "mrpc"]["mean_diff"].abs().max()
    assert f"{mrpc:.4f}" in claims.loc[2, "this run"]
    assert claims.loc[2, "verdict"] == ("reproduced" if mrpc <= 0.004 else "not reproduced")


def test_claims_that_do_not_hold_are_not_reproduced(tmp_path):
    tables = make_output(tmp_path, shift={"typhoon": 0.08}, ww_loss=-0.5, typhoon_gap=1.0,
                         kl=3 * PAPER_KL_NATS_PER_TOKEN)
    got = verdicts(tables)
    assert got["No significant"] == got["Every 95"] == got["On MRPC,"] == "not reproduced"
    assert got["Whole-word masking"] == got["Random and"] == got["Typhoon's masking"] == "not reproduced"
    assert "2 of 2" not in findings.headline(tables) and "significant after Holm" in findings.headline(tables)


def test_a_pipeline_check_is_never_judged(tmp_path):
    tables = make_output(tmp_path, profile="smoke")
    claims = findings.claims_table(tables)
    assert (claims["verdict"] == "not comparable").all() and claims["how"].str.contains("pipeline check").all()
    assert "not findings" in findings.headline(tables) and "reproduced" not in findings.headline(tables)


def test_the_kl_claim_needs_the_papers_calibration(tmp_path):
    tables = make_output(tmp_path)
    tables.budget_states["delta"] = 1.0
    claims = findings.claims_table(tables)
    assert claims.iloc[-1]["verdict"] == "not comparable" and "delta" in claims.iloc[-1]["how"]


def test_the_headline_table_shows_the_summary_and_the_comparisons(tmp_path):
    tables = make_output(tmp_path)
    table = findings.headline_table(tables)
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
    readme.write_text(f"# x\n\n## Results\n\n{findings.README_BEGIN}\nold\n{findings.README_END}\n\n## After\n")
    assert findings.update_readme(tmp_path / "ref", readme, check=True)
    assert "old" in readme.read_text()  # check: nothing written
    assert findings.update_readme(tmp_path / "ref", readme)
    text = readme.read_text()
    assert text.startswith("# x\n\n## Results\n\n") and text.endswith("\n\n## After\n") and "old" not in text
    assert "(ref/figures/paired_differences.png)" not in text  # no figure in this folder: no broken link
    assert "[`ref/report.html`](ref/report.html)" in text
    assert not findings.update_readme(tmp_path / "ref", readme)  # up to date now
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="no Results block"):
        findings.update_readme(tmp_path / "ref", readme)


def test_the_readme_results_agree_with_the_committed_reference_run():
    """README.md's Results block is what `python -m typhoon results-readme results/cpu` makes from the
    committed tables: a number changed in either place fails here."""
    reference = REPO / "results" / "cpu"
    if not (reference / "results.csv").is_file():
        pytest.skip("no committed reference run in results/cpu yet (made last, by "
                    "`python -m typhoon reproduce --profile cpu --out results/cpu`)")
    readme = REPO / "README.md"
    assert findings.readme_block_in(readme) == findings.readme_block(reference, readme), \
        "README.md's Results block is out of date: run `python -m typhoon results-readme results/cpu`"


def test_the_results_readme_command(tmp_path, capsys):
    from typhoon.cli import main

    make_output(tmp_path / "ref")
    readme = tmp_path / "README.md"
    readme.write_text(f"{findings.README_BEGIN}\nold\n{findings.README_END}\n")
    assert main(["results-readme", str(tmp_path / "ref"), "--readme", str(readme), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out and "old" in readme.read_text()
    assert main(["results-readme", str(tmp_path / "ref"), "--readme", str(readme)]) == 0
    assert main(["results-readme", str(tmp_path / "ref"), "--readme", str(readme), "--check"]) == 0
    assert main(["results-readme", str(tmp_path / "missing"), "--readme", str(readme)]) == 2
    assert "not a finished run of the study" in capsys.readouterr().err
