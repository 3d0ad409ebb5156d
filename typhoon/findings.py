"""What a finished run of the study found, read from its tables: the headline table, the paper's claims
checked one by one, and the README's Results block.

Everything here reads the files an output folder already has -- ``stats/summary.csv`` and
``stats/comparisons.csv`` (notebook 20), ``stats/budget_states.csv`` (notebook 30), ``results.csv``
and the records' ``mlm_loss.csv`` -- and computes nothing a notebook has not computed, except the
MLM-loss summaries the loss claims need. Every number in the README and the report's header comes
from here, so a test can regenerate them and compare (``python -m typhoon results-readme``).

A profile marked ``pipeline_check`` (the smoke profile: a tiny random model on a few hundred examples)
checks that the pipeline runs; its numbers are not findings, and every claim is "not comparable".
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon import paths, provenance, records
from typhoon.budget_spread import PAPER_KL_NATS_PER_TOKEN

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"
PAPER_MRPC_GAP_F1 = 0.004  # the paper: Typhoon within 0.004 F1 of the other strategies on MRPC
PAPER_CALIBRATION = {"p": 0.15, "delta": 0.4, "calibration": "minmax"}  # the KL is the paper's at these
KL_FACTOR = 2.0  # "KL ≈ 7e-4": reproduced within a factor of 2 either way (same order, same bottleneck)
LAST_SHARE = 0.2  # an MLM run's training loss: the mean over its last 20 % of steps (batch noise averages out)
README_BEGIN = "<!-- results:begin -->"
README_END = "<!-- results:end -->"


# --------------------------------------------------------------------------------------------------
# Reading an output folder


@dataclass
class Tables:
    """The tables of one output folder that the findings read (each may be empty when not produced)."""

    out_dir: Path
    profile: str
    pipeline_check: bool
    results: pd.DataFrame
    summary: pd.DataFrame
    comparisons: pd.DataFrame
    budget_states: pd.DataFrame
    losses: pd.DataFrame  # per run: task, backbone, strategy, seed, train_loss, dev_loss
    curves: pd.DataFrame  # seed-mean MLM training curves: task, backbone, strategy, step, mean, sd, n

    @property
    def reference(self) -> str:
        return str(self.comparisons["strategy_a"].iloc[0]) if len(self.comparisons) else "typhoon"

    @property
    def vs_reference(self) -> pd.DataFrame:
        c = self.comparisons
        return c[c["family"] == "vs_reference"] if len(c) else c


def read_tables(out_dir: str | os.PathLike) -> Tables:
    """Read an output folder's tables; FileNotFoundError naming what is missing."""
    from typhoon.config import load_profiles

    out_dir = Path(out_dir).resolve()
    need = [out_dir / "results.csv", out_dir / "stats" / "summary.csv", out_dir / "stats" / "comparisons.csv"]
    missing = [paths.shown(p) for p in need if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{paths.shown(out_dir)} is not a finished run of the study: missing {missing}")
    results = pd.read_csv(need[0])
    names = sorted(results["profile"].dropna().astype(str).unique())
    profile = names[0] if len(names) == 1 else "+".join(names) or "unknown"
    known = load_profiles()
    states = out_dir / "stats" / "budget_states.csv"
    losses = run_losses(results, out_dir)
    return Tables(out_dir=out_dir, profile=profile,
                  pipeline_check=any(known[n].pipeline_check for n in names if n in known),
                  results=results, summary=pd.read_csv(need[1]), comparisons=pd.read_csv(need[2]),
                  budget_states=pd.read_csv(states) if states.is_file() else pd.DataFrame(),
                  losses=losses, curves=mean_curves(results, out_dir))


def run_losses(results: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """Per ok run: its MLM training loss (mean over the last :data:`LAST_SHARE` of steps) and last dev loss."""
    rows = []
    for r in results[results["status"].astype(str) == "ok"].itertuples():
        path = Path(out_dir) / str(r.record_path) / "mlm_loss.csv"
        if not path.is_file():
            continue
        loss = pd.read_csv(path)
        train = loss.loc[loss["split"] == "train", "loss"].to_numpy(float)
        dev = loss.loc[loss["split"] == "dev", "loss"].to_numpy(float)
        if train.size == 0:
            continue
        last = train[-max(1, math.ceil(LAST_SHARE * train.size)):]
        rows.append(dict(task=r.task, backbone=r.backbone, strategy=r.strategy, seed=r.seed,
                         train_loss=float(last.mean()), dev_loss=float(dev[-1]) if dev.size else math.nan))
    return pd.DataFrame(rows, columns=[*records.RUN_KEYS, "train_loss", "dev_loss"])


def mean_curves(results: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """The MLM training curves averaged over seeds: per task, backbone, strategy and step, mean, sd, n."""
    from typhoon.plots import load_loss_curves

    curves = load_loss_curves(results, out_dir)
    train = curves[curves["split"] == "train"]
    columns = ["task", "backbone", "strategy", "step", "mean", "sd", "n"]
    if train.empty:
        return pd.DataFrame(columns=columns)
    agg = train.groupby(["task", "backbone", "strategy", "step"])["loss"].agg(["mean", "std", "count"])
    return agg.reset_index().rename(columns={"std": "sd", "count": "n"})[columns]


# --------------------------------------------------------------------------------------------------
# The headline table


def headline_table(tables: Tables, digits: int = 3) -> pd.DataFrame:
    """Per task × backbone × strategy: the dev metric (mean ± sd over n seeds) and, against the reference
    strategy, the paired difference with its 95 % CI, the TOST p (equivalence within the margin), the
    Holm-adjusted p and the verdict (from ``stats/comparisons.csv``; "—" on the reference's own row)."""
    s, c = tables.summary, tables.vs_reference
    diff_col = f"{tables.reference} − strategy [95 % CI]"
    tost_col = f"TOST p (±{float(c['margin'].iloc[0]):g})" if len(c) else "TOST p"
    rows = []
    for r in s.itertuples():
        match = c[(c["task"] == r.task) & (c["backbone"] == r.backbone) & (c["strategy_b"] == r.strategy)]
        row = {"task": r.task, "backbone": r.backbone, "metric": r.primary_metric, "strategy": r.strategy,
               "n": int(r.n), "mean ± sd": _mean_sd(r.mean, r.sd, digits),
               diff_col: "—", tost_col: "—", "Holm p": "—",
               "verdict": "reference" if r.strategy == tables.reference else "—"}
        if len(match):
            m = match.iloc[0]
            row.update({diff_col: _diff_ci(m, digits), tost_col: _p(m["tost_p"]), "Holm p": _p(m["p_holm"]),
                        "verdict": m["verdict"]})
        rows.append(row)
    return pd.DataFrame(rows)


def _mean_sd(mean: float, sd: float, digits: int) -> str:
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if np.isfinite(sd) else f"{mean:.{digits}f}"


def _diff_ci(row: pd.Series, digits: int) -> str:
    diff = f"{row['mean_diff']:+.{digits}f}"
    if np.isfinite(row["ci_low"]) and np.isfinite(row["ci_high"]):
        return f"{diff} [{row['ci_low']:+.{digits}f}, {row['ci_high']:+.{digits}f}]"
    return f"{diff} (no CI: {row['verdict']})"


def _p(value: float) -> str:
    return "—" if not np.isfinite(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")


# --------------------------------------------------------------------------------------------------
# The paper's claims


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, its figure, and how this run's tables test it (``check`` returns this
    run's figure and, when the tables can test it, whether it holds and why)."""

    claim: str
    paper: str
    check: Callable[[Tables], tuple[str, bool | None, str]]


def _no_significant(t: Tables):
    c = t.vs_reference[t.vs_reference["testable"].astype(bool)] if len(t.vs_reference) else t.vs_reference
    if c.empty:
        return "no testable comparison", None, "needs ≥ 2 paired seeds per strategy"
    sig = int((c["p_holm"] < 0.05).sum())
    raw = int((c["p"] < 0.05).sum())
    figure = (f"{sig} of {len(c)} significant after Holm (smallest Holm p = {c['p_holm'].min():.3f}); "
              f"{raw} with unadjusted p < 0.05")
    return figure, sig == 0, "Holm-adjusted paired t-tests against the reference, alpha = 0.05"


def _ci_contains_zero(t: Tables):
    c = t.vs_reference[t.vs_reference["testable"].astype(bool)] if len(t.vs_reference) else t.vs_reference
    if c.empty:
        return "no testable comparison", None, "needs ≥ 2 paired seeds per strategy"
    inside = int(((c["ci_low"] <= 0) & (c["ci_high"] >= 0)).sum())
    widest = float(np.max(np.maximum(c["ci_high"].abs(), c["ci_low"].abs())))
    figure = f"{inside} of {len(c)} contain 0 (they reach out to ±{widest:.3f})"
    return figure, inside == len(c), "95 % t CIs of the paired mean difference"


def _mrpc_gap(t: Tables):
    c = t.vs_reference[t.vs_reference["task"] == "mrpc"] if len(t.vs_reference) else t.vs_reference
    if c.empty or c["mean_diff"].isna().all():
        return "no MRPC comparison", None, "the grid has no MRPC comparison with the reference"
    gap = float(c["mean_diff"].abs().max())
    half = ((c["ci_high"] - c["ci_low"]) / 2).max()
    figure = f"largest |Δ F1| = {gap:.4f}" + (f" (95 % CI half-width up to {half:.4f})" if np.isfinite(half)
                                               else " (no CI: the differences cannot be tested)")
    return figure, gap <= PAPER_MRPC_GAP_F1, "largest absolute paired mean difference on MRPC"


def _whole_word_loss(t: Tables):
    means = t.losses.groupby(["task", "backbone", "strategy"])[["train_loss", "dev_loss"]].mean()
    groups = [(task, bb) for task, bb in dict.fromkeys(zip(means.index.get_level_values(0),
                                                            means.index.get_level_values(1), strict=True))]
    parts, holds = [], []
    for task, bb in groups:
        g = means.loc[(task, bb)]
        if "whole_word" not in g.index or len(g.index) < 2:
            continue
        others = g.drop(index="whole_word")
        holds.append(bool((g.loc["whole_word", "train_loss"] > others["train_loss"]).all()))
        parts.append(f"{task}/{bb}: whole_word {g.loc['whole_word', 'train_loss']:.3f} vs "
                     + ", ".join(f"{s} {v:.3f}" for s, v in others["train_loss"].items()))
    if not holds:
        return "no whole-word runs", None, "the grid has no whole-word masking beside another strategy"
    return ("; ".join(parts), all(holds),
            f"MLM training loss under each strategy's own masks (mean of the last {LAST_SHARE:.0%} of steps, "
            "mean over seeds)")


def _curves_identical(t: Tables, a: str = "typhoon", b: str = "random"):
    cv = t.curves
    parts, holds = [], []
    for (task, bb), g in cv.groupby(["task", "backbone"], sort=False):
        if not {a, b} <= set(g["strategy"]):
            continue
        wide = g.pivot(index="step", columns="strategy", values="mean")[[a, b]].dropna()
        sd = g[g["strategy"].isin([a, b])].pivot(index="step", columns="strategy", values="sd")[[a, b]]
        gap = float((wide[a] - wide[b]).abs().mean())
        noise = float(sd.mean(axis=1).mean())
        if not np.isfinite(noise):
            continue
        holds.append(gap <= noise)
        parts.append(f"{task}/{bb}: mean gap {gap:.3f} vs seed-to-seed sd {noise:.3f}")
    if not holds:
        return f"no {a} and {b} curves over ≥ 2 seeds", None, "needs both strategies with ≥ 2 seeds"
    return ("; ".join(parts), all(holds),
            "the seed-mean MLM training curves' mean absolute gap, against the sd between seeds at each step")


def _kl(t: Tables):
    states = t.budget_states
    if states.empty or "kl_to_uniform" not in states:
        return "no Typhoon masking state", None, "the grid has no Typhoon run"
    kl = states["kl_to_uniform"].astype(float)
    figure = f"{kl.median():.2e} nats/token (median of {len(kl)}; {kl.min():.2e}–{kl.max():.2e})"
    settings = {k: states[k].iloc[0] for k in PAPER_CALIBRATION if k in states}
    if any(str(settings.get(k)) != str(v) and not _close(settings.get(k), v) for k, v in PAPER_CALIBRATION.items()):
        return figure, None, f"calibrated with {settings}, the paper with {PAPER_CALIBRATION}"
    ratio = kl.median() / PAPER_KL_NATS_PER_TOKEN
    return (figure, 1 / KL_FACTOR <= ratio <= KL_FACTOR,
            f"{ratio:.2g}× the paper's; reproduced within a factor of {KL_FACTOR:g}")


def _close(value, target) -> bool:
    try:
        return math.isclose(float(value), float(target))
    except (TypeError, ValueError):
        return False


CLAIMS = (
    Claim("No significant difference between the masking strategies",
          "none significant (paired t-tests)", _no_significant),
    Claim("Every 95 % CI of the paired difference contains 0", "12 of 12", _ci_contains_zero),
    Claim("On MRPC, Typhoon is within 0.004 F1 of the other strategies", f"|Δ F1| ≤ {PAPER_MRPC_GAP_F1}",
          _mrpc_gap),
    Claim("Whole-word masking has a higher MLM loss", "higher than random and Typhoon", _whole_word_loss),
    Claim("Random and Typhoon MLM loss curves are nearly identical", "nearly identical curves", _curves_identical),
    Claim("Typhoon's masking is only ≈ 7e-4 nats/token from uniform (the budget-spread bottleneck)",
          f"KL ≈ {PAPER_KL_NATS_PER_TOKEN:.0e} nats/token", _kl),
)


def claims_table(tables: Tables) -> pd.DataFrame:
    """Each claim of the paper → the paper's figure → this run's figure → verdict (reproduced / not
    reproduced / not comparable) and why. A pipeline-check profile's numbers are shown but never judged."""
    rows = []
    for claim in CLAIMS:
        figure, holds, why = claim.check(tables)
        if tables.pipeline_check:
            verdict, why = NOT_COMPARABLE, f"pipeline check ({tables.profile} profile): not a finding"
        elif holds is None:
            verdict = NOT_COMPARABLE
        else:
            verdict = REPRODUCED if holds else NOT_REPRODUCED
        rows.append({"claim": claim.claim, "paper": claim.paper, "this run": figure, "verdict": verdict, "how": why})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# The headline, in words


def headline(tables: Tables) -> str:
    """What the run found and what it means, in two or three sentences built from the tables."""
    s = tables.summary
    setting = (f"{', '.join(sorted(s['backbone'].unique()))} × {', '.join(sorted(s['task'].unique()))} × "
               f"{', '.join(sorted(s['strategy'].unique()))}, {int(s['n'].max())} seeds")
    if tables.pipeline_check:
        return (f"Pipeline check ({tables.profile} profile: {setting}). These numbers show that every step runs "
                "end to end; they are not findings and are not compared with the paper.")
    claims = claims_table(tables)
    done = claims[claims["verdict"] != NOT_COMPARABLE]
    n_rep = int((done["verdict"] == REPRODUCED).sum())
    c = tables.vs_reference[tables.vs_reference["testable"].astype(bool)]
    text = f"{tables.profile} profile ({setting}): {n_rep} of {len(done)} testable claims of the paper reproduced."
    if len(c):
        sig = int((c["p_holm"] < 0.05).sum())
        eq = int((c["tost_p"] < 0.05).sum())
        widest = float(np.max(np.maximum(c["ci_high"].abs(), c["ci_low"].abs())))
        margin = float(c["margin"].iloc[0])
        if sig == 0:
            text += (f" No strategy differs significantly from {tables.reference} ({len(c)} comparisons, Holm); "
                     f"TOST shows equivalence within ±{margin:g} for {eq} of them, and the 95 % CIs reach out to "
                     f"±{widest:.3f}: what the masking strategy changes here is smaller than the seed-to-seed "
                     f"noise, and differences up to that size are not ruled out.")
        else:
            text += f" {sig} of {len(c)} comparisons with {tables.reference} are significant after Holm."
    return text


# --------------------------------------------------------------------------------------------------
# The README's Results block


def markdown_table(frame: pd.DataFrame) -> str:
    """A pipe table (``|`` in cells escaped)."""
    def cell(value) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in frame.columns) + " |",
             "|" + "|".join("---" for _ in frame.columns) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def results_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's Results block for the reference run in ``out_dir``; links are relative to
    ``link_base`` (the folder of the README, default the repository)."""
    tables = read_tables(out_dir)
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(tables.out_dir, base)).as_posix()
    manifest = provenance.read_manifest(tables.out_dir) or {}
    lines = [f"Reference run of the `{tables.profile}` profile (`{rel}/`): "
             + _provenance_line(manifest, tables) + ".", "", f"**{headline(tables)}**", ""]
    mix = provenance.results_numerics(tables.results) if "precision" in tables.results else {}
    if len(mix) > 1:
        lines += [f"**Mixed numerics**: {', '.join(f'{k} ({v} runs)' for k, v in sorted(mix.items()))}.", ""]
    lines += [markdown_table(headline_table(tables)), "",
              f"Paired differences are {tables.reference} minus the strategy, by seed; TOST tests equivalence "
              "within the margin; Holm adjusts the p-values over the comparisons with the reference.", ""]
    figure = tables.out_dir / "figures" / "paired_differences.png"
    if figure.is_file():
        lines += [f"![Paired differences with 95 % CIs and the equivalence margin]({rel}/figures/paired_differences.png)",
                  ""]
    lines += ["**The paper's claims, checked against this run's tables** (`typhoon.findings.claims_table`):", "",
              markdown_table(claims_table(tables)[["claim", "paper", "this run", "verdict"]]), "",
              f"The full report: [`{rel}/report.html`]({rel}/report.html); the executed notebooks: "
              f"[`{rel}/notebooks/`]({rel}/notebooks/); the tables: [`{rel}/stats/`]({rel}/stats/)."]
    return "\n".join(lines)


def _provenance_line(manifest: dict, tables: Tables) -> str:
    parts = []
    if manifest.get("commit"):
        parts.append(f"commit `{manifest['commit'][:10]}`" + (" (with local changes)" if manifest.get("dirty") else ""))
    if manifest.get("finished"):
        parts.append(manifest["finished"][:10])
    if manifest.get("machine"):
        parts.append(provenance.machine_line(manifest["machine"]))
    if manifest.get("runs_wall_s"):
        parts.append(f"{len(tables.results)} runs, {manifest['runs_wall_s'] / 60:.0f} min of training")
    return "; ".join(parts) or "no MANIFEST.json"


def readme_block(out_dir: str | os.PathLike, readme: Path) -> str:
    """The marked block as it belongs in ``readme`` (markers included)."""
    return f"{README_BEGIN}\n{results_markdown(out_dir, readme.parent)}\n{README_END}"


def update_readme(out_dir: str | os.PathLike, readme: str | os.PathLike | None = None, check: bool = False) -> bool:
    """Rewrite the block between :data:`README_BEGIN` and :data:`README_END` in ``readme`` (default: the
    repository's README.md) from ``out_dir``'s tables; returns whether it changed (``check``: do not write)."""
    readme = Path(readme) if readme else paths.repo_root() / "README.md"
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{paths.shown(readme)} has no Results block: add the lines {README_BEGIN} and {README_END}")
    new = pattern.sub(lambda _: readme_block(out_dir, readme), text, count=1)
    if new != text and not check:
        records.atomic_write_text(readme, new)
    return new != text


def readme_block_in(readme: Path) -> str | None:
    """The Results block currently in ``readme`` (markers included), None if it has none."""
    match = re.search(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), readme.read_text(encoding="utf-8"),
                      re.S)
    return match.group(0) if match else None
