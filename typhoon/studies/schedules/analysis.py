"""The schedules grid from its runs: does full-mask mass in the MLM phase change the fine-tuned model?

The theory (``typhoon.analysis.identifiability``, notebook ``40_mask_schedules``) says a schedule dominated by
large visible context (``fixed``: every sequence at the budget p = 0.15) never asks the MLM what a token
is when nothing around it is visible, so it cannot learn the corpus's global mode weights; mass on low-
visibility or fully masked inputs (``uniform`` rates, or the ``mixture`` with ``pi0`` fully masked
sequences) restores them. The quantity the theory speaks about is the MLM's loss on fully masked inputs
(``mlm_full_mask_loss``: the dev split with every maskable token masked, measured at the end of the MLM
phase). Whether that reaches the fine-tuned classifier is the open question.

The hypothesis is registered in the profile (``[schedules.hypothesis]``) before any run: the comparisons
(each schedule against ``fixed``, per task and strategy, paired by seed), the margin of the dev metric
per task, the level, and the direction the theory predicts for the full-mask loss. This module turns the
results table into one row per comparison (:func:`schedule_comparisons`) and sentences
(:func:`schedule_conclusion`): the dev-metric difference with its t interval, Holm over the table, TOST
at the margin, the seeds a decision at the margin would need, and the full-mask loss difference with its
interval beside the theory's prediction. The loss verdict (``theory``) is Holm-adjusted over the table like
the dev metric's outcome: at n = 3 per row, eight unadjusted 95 % intervals would call some rows "agrees" by
chance alone, so the unadjusted verdict is kept only beside it, labelled (``theory_unadjusted``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon import paths
from typhoon.analysis import paired, pairwise, run_summary, seed_budget, significance
from typhoon.atomic import atomic_write_csv
from typhoon.profiles import Profile, get_profile

FULL_MASK_LOSS = "mlm_full_mask_loss"
COLUMNS = ["task", "backbone", "strategy", "schedule", "reference", "primary_metric", "n", "seeds", "diff",
           "ci_low", "ci_high", "p", "p_holm", "holm_family", "margin", "tost_p", "seeds_for_power", "outcome",
           "full_mask_loss_reference", "full_mask_loss", "full_mask_loss_diff", "full_mask_loss_ci_low",
           "full_mask_loss_ci_high", "full_mask_loss_p", "full_mask_loss_p_holm", "full_mask_loss_holm_family",
           "predicted", "observed", "theory", "observed_unadjusted", "theory_unadjusted"]
TABLE = "schedules_vs_fixed.csv"  # under <out>/stats
OUTCOMES = ("equivalent", "different", "inconclusive", "cannot be tested")


@dataclass(frozen=True)
class ScheduleHypothesis:
    """What the schedules grid tests, as registered in ``[<profile>.hypothesis]``."""

    reference: str  # the schedule every other is compared with
    schedules: tuple[str, ...]  # the compared ones
    margins: Mapping[str, float]  # per task: the smallest dev-metric difference that matters
    alpha: float = 0.05
    power: float = 0.8
    full_mask_loss: Mapping[str, str] = field(default_factory=dict)  # schedule -> "lower" | "higher" than the reference
    why: Mapping[str, str] = field(default_factory=dict)


def schedule_hypothesis(profile: str | Profile = "schedules") -> ScheduleHypothesis:
    """The registered hypothesis of ``profile``; ValueError naming what is missing or wrong."""
    spec = get_profile(profile) if isinstance(profile, str) else profile
    body = dict(spec.hypothesis)
    if not body:
        raise ValueError(f"profile {spec.name!r} registers no [{spec.name}.hypothesis]")
    reference = body.get("reference", "fixed")
    if reference not in spec.schedules:
        raise ValueError(f"[{spec.name}.hypothesis] reference {reference!r} is not one of its schedules {spec.schedules}")
    margins = body.get("margin", {})
    missing = [t for t in spec.tasks if not (isinstance(margins.get(t), int | float) and margins[t] > 0)]
    if missing:
        raise ValueError(f"[{spec.name}.hypothesis] margin needs a positive value for task(s) {missing}")
    predicted = body.get("full_mask_loss", {})
    bad = {s: v for s, v in predicted.items() if v not in ("lower", "higher") or s not in spec.schedules}
    if bad:
        raise ValueError(f"[{spec.name}.hypothesis] full_mask_loss must map schedules to 'lower' or 'higher', got {bad}")
    return ScheduleHypothesis(reference=reference, schedules=tuple(s for s in spec.schedules if s != reference),
                              margins=dict(margins), alpha=float(body.get("alpha", 0.05)),
                              power=float(body.get("power", 0.8)), full_mask_loss=dict(predicted),
                              why=dict(body.get("why", {})))


def _observed(low: float, high: float) -> str:
    """The direction an unadjusted 95 % interval of the loss difference shows (it excludes 0 iff p < 0.05)."""
    if not np.isfinite(low):
        return "not measured" if np.isnan(low) else "not decided"
    return "lower" if high < 0 else "higher" if low > 0 else "not decided"


def _observed_adjusted(diff: float, p_holm: float, alpha: float) -> str:
    """The direction of the loss difference when its Holm-adjusted p is below ``alpha``, else "not decided"
    ("not measured" without a p: no loss recorded, < 2 seeds or no spread)."""
    if not np.isfinite(p_holm):
        return "not measured" if np.isnan(diff) else "not decided"
    if p_holm >= alpha:
        return "not decided"
    return "lower" if diff < 0 else "higher"


def _theory(predicted: str | None, observed: str) -> str:
    if observed in ("not decided", "not measured") or predicted is None:
        return "not decided"
    return "agrees" if observed == predicted else "disagrees"


def schedule_comparisons(results: pd.DataFrame, hypothesis: ScheduleHypothesis) -> pd.DataFrame:
    """One row per task × backbone × strategy × schedule (≠ the reference), paired by seed with the same
    strategy under the reference schedule (columns :data:`COLUMNS`): :func:`metric_comparisons` (does the
    schedule change the fine-tuned model's dev metric?) beside :func:`loss_comparisons` (does the full-mask
    MLM loss move the way the theory predicts?), row by row."""
    metric = metric_comparisons(results, hypothesis)
    if metric.empty:
        return pd.DataFrame(columns=COLUMNS)
    loss = loss_comparisons(results, hypothesis)
    return pd.concat([metric, loss.drop(columns=LABELS)], axis=1)[COLUMNS]


LABELS = ["task", "backbone", "strategy", "schedule", "reference", "primary_metric"]  # of each comparison


def schedule_pairs(results: pd.DataFrame, hypothesis: ScheduleHypothesis, value: str = "primary_value") -> pd.DataFrame:
    """The pairs of each comparison, for :mod:`typhoon.analysis.paired`: every strategy under each compared
    schedule against itself under the reference schedule, per task × backbone (where its ok runs have both),
    one row per seed it ran; ``a`` the per-run column ``value`` under the schedule, ``b`` under the reference
    (NaN where a run has none). Columns :data:`LABELS`, seed, a, b. ValueError when ``results`` has no
    schedule column, an ok run has no dev metric, or a run is duplicated."""
    if "schedule" not in results.columns:
        raise ValueError("results has no schedule column, so the schedules cannot be told apart: a results.csv "
                         "written before it had one; rebuild it from the records "
                         "(python -m typhoon reproduce --profile <profile> --out <folder>)")
    run_summary.ok_runs(results)  # refuses an ok run without a dev metric, a duplicated run, a missing schedule
    runs = results.loc[results["status"].astype(str) == "ok"].copy()
    runs[["strategy", "schedule"]] = runs[["strategy", "schedule"]].astype(str)
    runs[value] = pd.to_numeric(runs[value], errors="coerce") if value in runs else np.nan
    frames = []
    for (task, backbone), group in runs.groupby(["task", "backbone"], sort=False):
        for strategy in dict.fromkeys(group["strategy"]):
            arm = group[group["strategy"] == strategy]
            seeds = np.sort(arm["seed"].unique())
            wide = arm.pivot_table(index="seed", columns="schedule", values=value, aggfunc="first")
            for schedule in (s for s in hypothesis.schedules if {s, hypothesis.reference} <= set(arm["schedule"])):
                pair = wide.reindex(index=seeds, columns=[schedule, hypothesis.reference])
                frames.append(pd.DataFrame({
                    "task": task, "backbone": backbone, "strategy": strategy, "schedule": schedule,
                    "reference": hypothesis.reference, "primary_metric": str(arm["primary_metric"].iloc[0]),
                    "seed": seeds, "a": pair[schedule].to_numpy(float), "b": pair[hypothesis.reference].to_numpy(float)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*LABELS, *paired.VALUES])


def metric_comparisons(results: pd.DataFrame, hypothesis: ScheduleHypothesis) -> pd.DataFrame:
    """Does the schedule change the fine-tuned model? Per comparison (:func:`schedule_pairs` of the dev metric):
    ``n``, ``seeds``, ``diff`` (schedule minus reference) with its 95 % t interval and paired t ``p``;
    ``p_holm``, Holm over every row (``holm_family`` says so); ``tost_p`` at the task's ``margin``;
    ``seeds_for_power``, the seeds that give the hypothesis's power at a true difference of the margin from the
    measured sd (:func:`typhoon.analysis.seed_budget.seeds_needed`); and ``outcome``: equivalent (TOST < alpha),
    different (Holm p < alpha and not equivalent), inconclusive, or cannot be tested (< 2 seeds or no spread)."""
    pairs = schedule_pairs(results, hypothesis)
    table = paired.difference(pairs).rename(columns={"mean_diff": "diff"})
    tests = paired.t_test(pairs)
    table["p"] = tests["p"]
    table["p_holm"] = significance.holm(table["p"])
    table["holm_family"] = pairwise.holm_family(table["p"], f"every schedule vs {hypothesis.reference} in this table")
    table["margin"] = [float(hypothesis.margins.get(task, np.nan)) for task in table["task"]]
    table["tost_p"] = [significance.tost_paired(g["a"].to_numpy(float) - g["b"].to_numpy(float), margin)
                       for (_, g), margin in zip(_comparisons(pairs), table["margin"], strict=True)]
    needed = seed_budget.seeds_needed(table.assign(strategy_a=table["strategy"], strategy_b=table["reference"],
                                                   mean_diff=table["diff"], cohen_dz=tests["cohen_dz"]),
                                      power=hypothesis.power, alpha=hypothesis.alpha)
    table["seeds_for_power"] = needed["n_margin"].to_numpy()
    table["outcome"] = [_outcome(r, hypothesis.alpha) for r in table.itertuples()]
    return table[[*LABELS, "n", "seeds", "diff", "ci_low", "ci_high", "p", "p_holm", "holm_family", "margin",
                  "tost_p", "seeds_for_power", "outcome"]]


def _comparisons(pairs: pd.DataFrame):
    """Each comparison's paired seeds, in the order :mod:`typhoon.analysis.paired` answers them."""
    return ((key, g.dropna(subset=["a", "b"])) for key, g in pairs.groupby(LABELS, sort=False, dropna=False))


def loss_comparisons(results: pd.DataFrame, hypothesis: ScheduleHypothesis) -> pd.DataFrame:
    """Does the full-mask MLM loss move the way the theory predicts? Per comparison (:func:`schedule_pairs` of
    ``mlm_full_mask_loss``; NaN where the records hold none): each schedule's mean loss over its runs, the
    paired difference with its 95 % t interval and paired t p, that p Holm-adjusted over every row with one
    (``full_mask_loss_holm_family``); ``predicted``, the theory's direction; ``observed``, the direction when
    the adjusted p is below alpha (else "not decided"), and ``theory`` ("agrees", "disagrees", "not decided")
    from it: the verdict. ``observed_unadjusted`` / ``theory_unadjusted`` are the same read from the
    unadjusted 95 % interval ("lower"/"higher" when it excludes 0), to show beside the verdict."""
    pairs = schedule_pairs(results, hypothesis, FULL_MASK_LOSS)
    diff = paired.difference(pairs)
    means = [(g["b"].mean(), g["a"].mean()) for _, g in pairs.groupby(LABELS, sort=False, dropna=False)]
    table = diff[LABELS].copy()
    table["full_mask_loss_reference"], table["full_mask_loss"] = [m[0] for m in means], [m[1] for m in means]
    table["full_mask_loss_diff"] = diff["mean_diff"]
    table["full_mask_loss_ci_low"], table["full_mask_loss_ci_high"] = diff["ci_low"], diff["ci_high"]
    table["full_mask_loss_p"] = paired.t_test(pairs)["p"]
    table["full_mask_loss_p_holm"] = significance.holm(table["full_mask_loss_p"])
    table["full_mask_loss_holm_family"] = pairwise.holm_family(
        table["full_mask_loss_p"], f"the full-mask loss, every schedule vs {hypothesis.reference} in this table")
    table["predicted"] = [hypothesis.full_mask_loss.get(schedule) for schedule in table["schedule"]]
    table["observed"] = [_observed_adjusted(r.full_mask_loss_diff, r.full_mask_loss_p_holm, hypothesis.alpha)
                         for r in table.itertuples()]
    table["theory"] = [_theory(r.predicted, r.observed) for r in table.itertuples()]
    table["observed_unadjusted"] = [_observed(low, high) for low, high in
                                    zip(table["full_mask_loss_ci_low"], table["full_mask_loss_ci_high"], strict=True)]
    table["theory_unadjusted"] = [_theory(r.predicted, r.observed_unadjusted) for r in table.itertuples()]
    return table


def _outcome(row, alpha: float) -> str:
    if not np.isfinite(row.p):
        return "cannot be tested"
    if row.tost_p < alpha:
        return "equivalent"
    return "different" if row.p_holm < alpha else "inconclusive"


def schedule_conclusion(table: pd.DataFrame, hypothesis: ScheduleHypothesis) -> str:
    """The answer in sentences, every number read from ``table`` (:func:`schedule_comparisons`)."""
    if table.empty:
        return ("No schedule runs to compare: the results hold no run of a schedule beside the same strategy "
                f"under {hypothesis.reference!r} (run `make reproduce PROFILE=schedules`).")
    lines = []
    for r in table.itertuples():
        metric = f"{r.primary_metric} {r.diff:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}]" if np.isfinite(r.ci_low) \
            else f"{r.primary_metric} {r.diff:+.4f} (no interval)"
        loss = (f"full-mask MLM loss {r.full_mask_loss_diff:+.3f} [{r.full_mask_loss_ci_low:+.3f}, "
                f"{r.full_mask_loss_ci_high:+.3f}] nats, Holm p {r.full_mask_loss_p_holm:.3f} (theory: "
                f"{r.predicted or 'no prediction'}; {r.theory}; unadjusted p {r.full_mask_loss_p:.3f}: "
                f"{r.theory_unadjusted})"
                if np.isfinite(r.full_mask_loss_ci_low) else f"full-mask MLM loss {r.observed}")
        need = f", {int(r.seeds_for_power)} seeds for 80 % power at ±{r.margin:g}" if np.isfinite(r.seeds_for_power) else ""
        lines.append(f"- {r.task}/{r.strategy}, {r.schedule} − {r.reference} (n = {r.n}): {metric}, "
                     f"{r.outcome} at ±{r.margin:g}{need}; {loss}.")
    return headline(table) + "\n\n" + "\n".join(lines)


def headline(table: pd.DataFrame) -> str:
    """The answer in two sentences: the dev-metric outcomes and how often the full-mask loss moved as predicted
    (Holm-adjusted, as the dev metric; the unadjusted count beside it, labelled)."""
    agree = (table["theory"] == "agrees").sum()
    agree_unadjusted = (table["theory_unadjusted"] == "agrees").sum()
    family = f"Holm over the {int(table['full_mask_loss_p'].notna().sum())}"
    return (f"Dev metric: {', '.join(f'{(table.outcome == o).sum()} {o}' for o in OUTCOMES if (table.outcome == o).any())}"
            f" of {len(table)} comparisons ({table['holm_family'].iloc[0]}). Full-mask MLM loss: the theory's "
            f"direction is seen in {agree} of {len(table)} ({family}; unadjusted 95 % intervals: {agree_unadjusted} "
            f"of {len(table)}).")


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`schedule_comparisons` for a reader (README block, report): one row per comparison with the
    dev-metric difference and interval, TOST p, outcome and seeds needed, then the full-mask loss of both
    schedules, its difference and interval, its Holm-adjusted p and the theory's prediction against it (the
    verdict), and beside it, labelled, the unadjusted p and the verdict an unadjusted interval would give."""
    def interval(mean: float, low: float, high: float, digits: int) -> str:
        if not np.isfinite(mean):
            return "—"  # not measured (a record without the full-mask loss)
        return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]" if np.isfinite(low) else f"{mean:+.{digits}f}"

    def losses(reference: float, schedule: float) -> str:
        return f"{reference:.3f} → {schedule:.3f}" if np.isfinite(reference) and np.isfinite(schedule) else "—"

    rows = table.itertuples()
    return pd.DataFrame([{
        "task": r.task, "strategy": r.strategy, "comparison": f"{r.schedule} − {r.reference}", "seeds": int(r.n),
        "dev metric difference [95 % CI]": f"{r.primary_metric} " + interval(r.diff, r.ci_low, r.ci_high, 4),
        "TOST p": f"{r.tost_p:.3f} (±{r.margin:g})" if np.isfinite(r.tost_p) else "—", "outcome": r.outcome,
        "seeds for 80 % power": str(int(r.seeds_for_power)) if np.isfinite(r.seeds_for_power) else "—",
        "full-mask loss (nats)": losses(r.full_mask_loss_reference, r.full_mask_loss),
        "loss difference [95 % CI]": interval(r.full_mask_loss_diff, r.full_mask_loss_ci_low, r.full_mask_loss_ci_high, 3),
        "loss p (Holm)": f"{r.full_mask_loss_p_holm:.3f}" if np.isfinite(r.full_mask_loss_p_holm) else "—",
        "theory (Holm)": f"{r.predicted or 'none'}: {r.theory}",
        "unadjusted p: theory": (f"{r.full_mask_loss_p:.3f}: {r.theory_unadjusted}"
                                 if np.isfinite(r.full_mask_loss_p) else r.theory_unadjusted)} for r in rows])


def is_schedule_study(out_dir: str | Path) -> bool:
    """Whether ``out_dir`` holds a schedules grid's comparison (``stats/schedules_vs_fixed.csv``, written by
    notebook 40 from a folder with schedule runs)."""
    return (Path(out_dir) / "stats" / TABLE).is_file()


def read_table(out_dir: str | Path) -> pd.DataFrame:
    """The committed comparison of a schedules folder (FileNotFoundError naming the missing table)."""
    path = Path(out_dir) / "stats" / TABLE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run `python -m typhoon reproduce --profile schedules` first")
    return pd.read_csv(path)


def study_of_folder(out_dir: str | Path, profile: str | Profile = "schedules") -> tuple[pd.DataFrame, str]:
    """The schedules comparison of the runs in ``out_dir`` (its ``results.csv``) under ``profile``'s
    hypothesis, written to ``stats/schedules_vs_fixed.csv`` when there is anything to compare; and the
    text for notebook 40's last section: the hypothesis as registered, then the answer (or, without
    schedule runs in the folder, where they would come from)."""
    hypothesis = schedule_hypothesis(profile)
    path = Path(out_dir) / "results.csv"
    table = (schedule_comparisons(run_summary.load_results(path, tidy=True), hypothesis) if path.is_file()
             else pd.DataFrame(columns=COLUMNS))
    if not table.empty:
        atomic_write_csv(Path(out_dir) / "stats" / TABLE, table)
    registered = (f"**Registered before the runs** (`[schedules.hypothesis]` in `typhoon/profiles.toml`): "
                  f"{hypothesis.why.get('hypothesis', '')} Margins: "
                  + ", ".join(f"{task} ±{m:g}" for task, m in hypothesis.margins.items()) + ".")
    if table.empty and not path.is_file():
        return table, (f"{registered}\n\nNo `results.csv` in {paths.shown(Path(out_dir))}: the schedules grid's runs "
                       "come from `make reproduce PROFILE=schedules` (output `outputs/schedules/`; the committed run, "
                       "once trained, in `results/schedules/`).")
    return table, f"{registered}\n\n{schedule_conclusion(table, hypothesis)}"
