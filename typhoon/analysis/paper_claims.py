"""The paper's claims, checked one by one against a finished run's tables (:class:`typhoon.analysis.output_tables.Tables`):
each :class:`Claim` with the paper's figure, a criterion stated before any data and its check, the runs in the
paper's setting they are judged on (:func:`paper_runs`), the claims table and the headline in sentences (the
README's Results block is written from them by :mod:`typhoon.report.results_readme`).

A check computes nothing a notebook has not computed, except the MLM-loss comparisons and the KL's interval
the loss and KL claims need. Every verdict in the README and the report's header comes from here, so a test
can regenerate them and compare (``python -m typhoon results-readme``).

A profile marked ``pipeline_check`` (the smoke profile: a tiny random model on a few hundred examples)
checks that the pipeline runs; its numbers are not findings, and every claim is "not comparable".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as st

from typhoon.analysis import pairwise, run_summary, significance
from typhoon.analysis.kl.budget_spread import PAPER_KL_NATS_PER_TOKEN
from typhoon.analysis.output_tables import LAST_SHARE, Tables
from typhoon.analysis.verdict_text import not_significant_power
from typhoon.records import RUN_KEYS

REPRODUCED, CONTRADICTED, NOT_DECIDED = "reproduced", "contradicted", "not decided"


NOT_COMPARABLE = "not comparable"  # no runs to judge the claim on, or a pipeline check's numbers


# A claim of no significant difference that the runs do not contradict, where the paired t-test had too
# little power to see a medium effect (significance.POWER_TARGET at dz 0.5): the outcome was likely whatever
# the truth, so it is consistent with the paper and no more.
CONSISTENT = "consistent at low power"


OUTCOMES = (REPRODUCED, CONSISTENT, CONTRADICTED, NOT_DECIDED, NOT_COMPARABLE)



CLAIM_COLUMNS = ["claim", "paper", "runs", "criterion", "this run", "verdict"]


PAPER_MRPC_GAP_F1 = 0.004  # the paper: Typhoon within 0.004 F1 of the other strategies on MRPC


PAPER_CALIBRATION = {"p": 0.15, "delta": 0.4, "calibration": "minmax"}  # the KL is the paper's at these


KL_FACTOR = 3.0  # "KL ≈ 7e-4": reproduced within a factor of 3 either way (same order, same bottleneck)


PAPER_STRATEGIES = ("typhoon", "random", "whole_word")


LOSS_TOLERANCE = 0.01  # "nearly identical" MLM losses: within 1 % of random masking's final loss


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, its figure, the criterion that tests it (stated before any data), and
    ``check``: this run's figure and outcome from the selected runs (:class:`PaperRuns`)."""

    claim: str
    paper: str
    criterion: str
    check: Callable[[PaperRuns], tuple[str, str]]


@dataclass
class PaperRuns:
    """The runs of a folder that the paper's claims are about, with what was left out and why."""

    tables: Tables
    runs: pd.DataFrame  # ok runs of results.csv in the paper's setting
    states: pd.DataFrame  # the budget states of those runs' Typhoon cells
    left_out: dict[str, str]  # strategy -> why its runs are not the paper's

    def describe(self, strategies: Iterable[str] | None = None, tasks: Iterable[str] | None = None) -> str:
        runs = self.runs
        if strategies is not None:
            runs = runs[runs["strategy"].isin(list(strategies))]
        if tasks is not None:
            runs = runs[runs["task"].isin(list(tasks))]
        if runs.empty:
            return "none"
        seeds = sorted(runs["seed"].unique())
        names = [f"{s} (min-max, δ {PAPER_CALIBRATION['delta']:g}, MLM saliency)" if s == "typhoon" else s
                 for s in dict.fromkeys(runs["strategy"])]
        text = (f"{', '.join(names)} × {', '.join(dict.fromkeys(runs['task']))} × "
                f"{', '.join(dict.fromkeys(runs['backbone']))}, seeds {_seed_list(seeds)} ({len(runs)} runs)")
        if self.left_out and strategies is None:
            text += "; left out: " + "; ".join(f"{k} ({v})" for k, v in self.left_out.items())
        return text


def _seed_list(seeds) -> str:
    seeds = [int(s) for s in seeds]
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def paper_runs(tables: Tables) -> PaperRuns:
    """The ok runs in the paper's setting: random and whole-word masking, and Typhoon runs whose saved
    masking state says min-max calibration at the paper's delta and budget (:data:`PAPER_CALIBRATION`) and
    whose record says MLM saliency. Every Typhoon run's own state is checked (not the first one's); a
    Typhoon run without a state, or any other strategy, is left out and named."""
    r = tables.results
    ok = r[r["status"].astype(str) == "ok"].copy()
    others = [s for s in dict.fromkeys(ok["strategy"]) if s not in PAPER_STRATEGIES]
    left_out = {", ".join(others): "not the paper's strategies"} if others else {}
    typhoon = ok[ok["strategy"] == "typhoon"]
    states = tables.budget_states
    states = states[states["strategy"] == "typhoon"] if len(states) else pd.DataFrame(columns=RUN_KEYS)
    states = states[_paper_setting(states)]
    at_setting = {_run_key(x) for x in states.itertuples(index=False)}
    mlm = (typhoon["saliency"].isna() | (typhoon["saliency"].astype(str) == "mlm")) if "saliency" in typhoon \
        else pd.Series(True, index=typhoon.index)
    chosen = typhoon[mlm & np.array([_run_key(x) in at_setting for x in typhoon.itertuples(index=False)], dtype=bool)]
    if len(chosen) < len(typhoon):
        left_out["typhoon"] = (f"{len(typhoon) - len(chosen)} of {len(typhoon)} runs not at {_setting_text()} "
                               "with MLM saliency, or without a saved masking state to check")
    keep = ok["strategy"].isin(["random", "whole_word"]) | ok.index.isin(chosen.index)
    chosen_keys = {_run_key(x) for x in chosen.itertuples(index=False)}
    states = states[np.array([_run_key(x) in chosen_keys for x in states.itertuples(index=False)], dtype=bool)]
    return PaperRuns(tables=tables, runs=ok[keep].reset_index(drop=True), states=states.reset_index(drop=True),
                     left_out=left_out)


def _run_key(row) -> tuple[str, ...]:
    return tuple(str(getattr(row, k)) for k in RUN_KEYS)


def _paper_setting(states: pd.DataFrame) -> pd.Series:
    """Per state row: is its calibration the paper's (every key of :data:`PAPER_CALIBRATION`)?"""
    good = pd.Series(True, index=states.index)
    for key, want in PAPER_CALIBRATION.items():
        if key not in states:
            return pd.Series(False, index=states.index)
        good &= np.array([str(v) == str(want) or _close(v, want) for v in states[key]], dtype=bool)
    return good


def _setting_text() -> str:
    return ", ".join(f"{k} {v}" for k, v in PAPER_CALIBRATION.items())


def _interval_outcome(lows, highs, low: float, high: float) -> str:
    """Reproduced when every interval lies inside [low, high], contradicted when one lies wholly outside,
    not decided otherwise (one straddles an edge, or has no interval)."""
    lows, highs = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
    if lows.size and np.all((lows >= low) & (highs <= high)):
        return REPRODUCED
    if np.any((highs < low) | (lows > high)):
        return CONTRADICTED
    return NOT_DECIDED


def _ci(row, digits: int = 3) -> str:
    if not (np.isfinite(row.ci_low) and np.isfinite(row.ci_high)):
        return f"{row.mean_diff:+.{digits}f} (no CI)"
    return f"{row.mean_diff:+.{digits}f} [{row.ci_low:+.{digits}f}, {row.ci_high:+.{digits}f}]"


def _vs_typhoon(pr: PaperRuns, tasks: Iterable[str] | None = None) -> pd.DataFrame:
    """Typhoon minus each other paper strategy, paired by seed, per task × backbone (dev metric)."""
    runs = pr.runs if tasks is None else pr.runs[pr.runs["task"].isin(list(tasks))]
    frames = [pairwise.paired_differences(runs, "primary_value", "typhoon", other)
              for other in PAPER_STRATEGIES[1:] if other in set(runs["strategy"])]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _label(row) -> str:
    return f"{row.task}/{row.strategy_b}"


def _no_significant(pr: PaperRuns):
    c = _vs_typhoon(pr)
    c = c[c["p"].notna()] if len(c) else c
    if c.empty:
        return "no testable comparison (needs ≥ 2 paired seeds whose differences vary)", NOT_COMPARABLE
    p_holm = significance.holm(c["p"])
    sig = int((p_holm < 0.05).sum())
    figure = (f"{sig} of {len(c)} significant (Holm over these {len(c)}; smallest Holm p = {p_holm.min():.3f}); "
              f"{int((c['p'] < 0.05).sum())} with unadjusted p < 0.05")
    return _not_significant_outcome(figure, c["n"], sig == 0)


def _not_significant_outcome(figure: str, n_seeds: pd.Series, none_significant: bool) -> tuple[str, str]:
    """A claim that no test is significant: contradicted where one is; where none is, reproduced only if the
    paired t-test had the power to see a medium effect (dz 0.5) at these seeds, else consistent and no more,
    the power stated (:func:`typhoon.analysis.verdict_text.not_significant_power`)."""
    if not none_significant:
        return figure, CONTRADICTED
    power = not_significant_power(n_seeds)
    return (figure + f"; {power}", CONSISTENT) if power else (figure, REPRODUCED)


def _ci_contains_zero(pr: PaperRuns):
    c = _vs_typhoon(pr)
    c = c[c["ci_low"].notna()] if len(c) else c
    if c.empty:
        return "no testable comparison (needs ≥ 2 paired seeds whose differences vary)", NOT_COMPARABLE
    inside = (c["ci_low"] <= 0) & (c["ci_high"] >= 0)
    figure = f"{int(inside.sum())} of {len(c)} contain 0: " + "; ".join(
        f"{_label(r)} {_ci(r)}" for r in c.itertuples())
    return _not_significant_outcome(figure, c["n"], bool(inside.all()))  # a CI with 0 inside: p ≥ 0.05


def _mrpc_gap(pr: PaperRuns):
    c = _vs_typhoon(pr, tasks=["mrpc"])
    if c.empty:
        return "no MRPC comparison with Typhoon", NOT_COMPARABLE
    figure = "; ".join(f"{_label(r)} {_ci(r, 4)}" for r in c.itertuples())
    return figure, _interval_outcome(c["ci_low"], c["ci_high"], -PAPER_MRPC_GAP_F1, PAPER_MRPC_GAP_F1)


def _loss_differences(pr: PaperRuns, a: str, others: Iterable[str]) -> pd.DataFrame:
    losses = pr.tables.losses
    keys = list(RUN_KEYS)
    losses = losses.merge(pr.runs[keys], on=keys) if len(losses) else losses
    frames = [pairwise.paired_differences(losses, "train_loss", a, b) for b in others]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _loss_text(c: pd.DataFrame) -> str:
    return "; ".join(f"{r.task}/{r.backbone} {r.strategy_a} − {r.strategy_b} {_ci(r)} "
                     f"(higher in {r.n_positive} of {r.n} seeds)" for r in c.itertuples())


def _whole_word_loss(pr: PaperRuns):
    c = _loss_differences(pr, "whole_word", ["random", "typhoon"])
    if c.empty:
        return "no whole-word runs beside another strategy", NOT_COMPARABLE
    return _loss_text(c), _interval_outcome(c["ci_low"], c["ci_high"], 0.0, math.inf)


def _losses_identical(pr: PaperRuns):
    c = _loss_differences(pr, "typhoon", ["random"])
    if c.empty:
        return "no Typhoon and random runs with loss curves", NOT_COMPARABLE
    tolerance = LOSS_TOLERANCE * c["mean_b"]
    figure = _loss_text(c) + f"; tolerance ±{', ±'.join(f'{t:.3f}' for t in tolerance)}"
    lows, highs = (c["ci_low"] / tolerance).to_numpy(), (c["ci_high"] / tolerance).to_numpy()
    return figure, _interval_outcome(lows, highs, -1.0, 1.0)


def _kl(pr: PaperRuns):
    all_states = pr.tables.budget_states
    if all_states.empty or "kl_to_uniform" not in all_states:
        return "no Typhoon masking state", NOT_COMPARABLE
    states = pr.states
    if states.empty:
        found = all_states[[k for k in PAPER_CALIBRATION if k in all_states]].drop_duplicates()
        return (f"no state at the paper's calibration ({_setting_text()}); the states have "
                f"{found.to_dict('records')}"), NOT_COMPARABLE
    log_kl = np.log(states["kl_to_uniform"].astype(float).to_numpy())
    n = log_kl.size
    median = float(np.median(states["kl_to_uniform"].astype(float)))
    figure = (f"{len(states)} states (min-max, δ {PAPER_CALIBRATION['delta']:g}): median {median:.2e} nats/token "
              f"({np.exp(log_kl.min()):.2e}–{np.exp(log_kl.max()):.2e})")
    if n < 2:
        return figure + "; one state: no interval", NOT_DECIDED
    mean, sd = float(log_kl.mean()), float(log_kl.std(ddof=1))
    half = st.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    low, high = math.exp(mean - half), math.exp(mean + half)
    figure += (f"; geometric mean {math.exp(mean):.2e} [95 % CI {low:.2e}, {high:.2e}] = "
               f"{math.exp(mean) / PAPER_KL_NATS_PER_TOKEN:.2g}× the paper's")
    return figure, _interval_outcome([low], [high], PAPER_KL_NATS_PER_TOKEN / KL_FACTOR,
                                     PAPER_KL_NATS_PER_TOKEN * KL_FACTOR)


def _close(value, target) -> bool:
    try:
        return math.isclose(float(value), float(target))
    except (TypeError, ValueError):
        return False


CLAIMS = (
    Claim("No significant difference between the masking strategies", "none significant (paired t-tests)",
          "every paired t-test of Typhoon against another strategy (per task × backbone) has Holm p ≥ 0.05, "
          "Holm over the comparisons of this claim", _no_significant),
    Claim("Every 95 % CI of the paired difference contains 0", "12 of 12",
          "every 95 % t CI of Typhoon minus another strategy (dev metric, paired by seed) contains 0",
          _ci_contains_zero),
    Claim("On MRPC, Typhoon is within 0.004 F1 of the other strategies", f"|Δ F1| ≤ {PAPER_MRPC_GAP_F1}",
          f"the 95 % t CI of each paired difference (Typhoon minus each other strategy, MRPC F1) lies inside "
          f"±{PAPER_MRPC_GAP_F1}; contradicted when one lies wholly outside", _mrpc_gap),
    Claim("Whole-word masking has a higher MLM loss", "higher than random and Typhoon",
          f"the 95 % t CI of whole-word minus each other strategy's final MLM training loss (mean of the last "
          f"{LAST_SHARE:.0%} of steps, paired by seed) lies above 0", _whole_word_loss),
    Claim("Random and Typhoon MLM loss curves are nearly identical", "nearly identical curves",
          f"the 95 % t CI of Typhoon minus random final MLM training loss (paired by seed) lies within "
          f"±{LOSS_TOLERANCE:.0%} of random's mean final loss", _losses_identical),
    Claim("Typhoon's masking is only ≈ 7e-4 nats/token from uniform (the budget-spread bottleneck)",
          f"KL ≈ {PAPER_KL_NATS_PER_TOKEN:.0e} nats/token",
          f"over the states at the paper's calibration ({_setting_text()}; one per run: task × seed), the 95 % "
          f"t CI of the mean log KL lies within a factor of {KL_FACTOR:g} of {PAPER_KL_NATS_PER_TOKEN:.0e}",
          _kl),
)


CLAIM_RUNS = {  # which of the selected runs each claim reads (None: all of them)
    "On MRPC, Typhoon is within 0.004 F1 of the other strategies": dict(tasks=["mrpc"]),
    "Random and Typhoon MLM loss curves are nearly identical": dict(strategies=["typhoon", "random"]),
    "Typhoon's masking is only ≈ 7e-4 nats/token from uniform (the budget-spread bottleneck)":
        dict(strategies=["typhoon"]),
}


def claims_table(tables: Tables) -> pd.DataFrame:
    """Each claim of the paper: the paper's figure, the runs it is judged on, its criterion (stated before
    the data), this run's figure and the outcome -- reproduced / contradicted / not decided, or not
    comparable (no runs to judge it, or a pipeline-check profile: its numbers are shown, never judged)."""
    pr = paper_runs(tables)
    rows = []
    for claim in CLAIMS:
        figure, outcome = claim.check(pr)
        if tables.pipeline_check:
            outcome = NOT_COMPARABLE
            figure += f" — pipeline check ({tables.profile} profile): not a finding"
        rows.append({"claim": claim.claim, "paper": claim.paper, "runs": pr.describe(**CLAIM_RUNS.get(claim.claim, {})),
                     "criterion": claim.criterion, "this run": figure, "verdict": outcome})
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def headline(tables: Tables) -> str:
    """What the run found and what it means, in two or three sentences built from the tables."""
    s = tables.summary
    setting = (f"{', '.join(sorted(s['backbone'].unique()))} × {', '.join(sorted(s['task'].unique()))} × "
               f"{', '.join(sorted(s['strategy'].unique()))}, {int(s['n'].max())} seeds")
    if tables.pipeline_check:
        return (f"Pipeline check ({tables.profile} profile: {setting}). These numbers show that every step runs "
                "end to end; they are not findings and are not compared with the paper.")
    claims = claims_table(tables)
    counts = claims["verdict"].value_counts()
    judged = ", ".join(f"{int(counts[o])} {o}" for o in OUTCOMES if o in counts)
    c = tables.vs_reference[tables.vs_reference["testable"].astype(bool)]
    text = f"{tables.profile} profile ({setting}): of the paper's {len(claims)} claims, {judged}."
    if len(c):
        sig = int((c["p_holm"] < 0.05).sum())
        eq = int((c["tost_p"] < 0.05).sum())
        widest = float(np.max(np.maximum(c["ci_high"].abs(), c["ci_low"].abs())))
        power = not_significant_power(c["n"])
        if sig == 0:
            text += (f" No strategy differs significantly from {tables.reference} (Holm over {len(c)} comparisons)"
                     + (f": {power}" if power else "") + "; "
                     f"TOST shows equivalence within {run_summary.margin_text(c)} for {eq} of them, and the 95 % CIs reach out to "
                     f"±{widest:.3f}: what the masking strategy changes here is smaller than the seed-to-seed "
                     f"noise, and differences up to that size are not ruled out.")
        else:
            text += f" {sig} of {len(c)} comparisons with {tables.reference} are significant after Holm."
    return text
