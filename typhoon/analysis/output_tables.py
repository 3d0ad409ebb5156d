"""What a finished run of the study holds, read back from its output folder, and the headline table made from it.

:func:`read_tables` reads the files an output folder already has -- ``stats/summary.csv`` and
``stats/comparisons.csv`` (notebook 20), ``stats/budget_states.csv`` (notebook 30), ``results.csv`` and the
records' ``mlm_loss.csv`` -- into one :class:`Tables`, computing nothing a notebook has not computed except
each run's final MLM losses and the seed-mean loss curves. :func:`headline_table` and :func:`holm_caption`
show it per task × backbone × strategy, in the README's Results block
(:mod:`typhoon.report.results_readme`) and the report's Summary (:mod:`typhoon.report.summary_html`); the
paper's claims are judged from the same tables (:mod:`typhoon.analysis.paper_claims`).
"""


from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon import paths
from typhoon.analysis import run_summary
from typhoon.records import RUN_KEYS

LAST_SHARE = 0.2  # an MLM run's training loss: the mean over its last 20 % of steps (batch noise averages out)


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
    from typhoon.profiles import load_profiles

    out_dir = Path(out_dir).resolve()
    need = [out_dir / "results.csv", out_dir / "stats" / "summary.csv", out_dir / "stats" / "comparisons.csv"]
    missing = [paths.shown(p) for p in need if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{paths.shown(out_dir)} is not a finished run of the study: missing {missing}")
    results = run_summary.load_results(need[0], out_dir)  # refuses a truncated table, naming it
    names = sorted(results["profile"].dropna().astype(str).unique())
    profile = names[0] if len(names) == 1 else "+".join(names) or "unknown"
    known = load_profiles()
    states = out_dir / "stats" / "budget_states.csv"
    losses = run_losses(results, out_dir)
    return Tables(out_dir=out_dir, profile=profile,
                  pipeline_check=any(known[n].pipeline_check for n in names if n in known),
                  results=results, summary=pd.read_csv(need[1]), comparisons=pd.read_csv(need[2]),
                  budget_states=read_optional_csv(states),
                  losses=losses, curves=mean_curves(results, out_dir))


def read_optional_csv(path: Path) -> pd.DataFrame:
    """The table in ``path``; empty where there is none, or where it has no columns (a grid without Typhoon
    runs writes its budget states as an empty table)."""
    try:
        return pd.read_csv(path) if path.is_file() else pd.DataFrame()
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


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
    return pd.DataFrame(rows, columns=[*RUN_KEYS, "train_loss", "dev_loss"])


def mean_curves(results: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """The MLM training curves averaged over seeds: per task, backbone, strategy and step, mean, sd, n."""
    curves = run_summary.load_loss_curves(results, out_dir)
    train = curves[curves["split"] == "train"]
    columns = ["task", "backbone", "strategy", "step", "mean", "sd", "n"]
    if train.empty:
        return pd.DataFrame(columns=columns)
    agg = train.groupby(["task", "backbone", "strategy", "step"])["loss"].agg(["mean", "std", "count"])
    return agg.reset_index().rename(columns={"std": "sd", "count": "n"})[columns]


def headline_table(tables: Tables, digits: int = 3) -> pd.DataFrame:
    """Per task × backbone × strategy: the dev metric (mean ± sd over n seeds) and, against the reference
    strategy, the paired difference with its 95 % CI, the TOST p (equivalence within the margin), the
    Holm-adjusted p and the verdict (from ``stats/comparisons.csv``; "—" on the reference's own row)."""
    s, c = tables.summary, tables.vs_reference
    diff_col = f"{tables.reference} − strategy [95 % CI]"
    tost_col = f"TOST p ({run_summary.margin_text(c)})" if len(c) else "TOST p"
    holm_col = f"Holm p (family of {int(c['p'].notna().sum())})" if len(c) else "Holm p"
    rows = []
    for r in s.itertuples():
        match = c[(c["task"] == r.task) & (c["backbone"] == r.backbone) & (c["strategy_b"] == r.strategy)]
        row = {"task": r.task, "backbone": r.backbone, "metric": r.primary_metric, "strategy": r.strategy,
               "n": int(r.n), "mean ± sd": _mean_sd(r.mean, r.sd, digits),
               diff_col: "—", tost_col: "—", holm_col: "—",
               "verdict": "reference" if r.strategy == tables.reference else "—"}
        if len(match):
            m = match.iloc[0]
            row.update({diff_col: _diff_ci(m, digits), tost_col: _p(m["tost_p"]), holm_col: _p(m["p_holm"]),
                        "verdict": m["verdict"]})
        rows.append(row)
    return pd.DataFrame(rows)


def holm_caption(tables: Tables) -> str:
    """The Holm family of the headline table's p-values, in words (``stats/comparisons.csv``'s own)."""
    c = tables.vs_reference
    if "holm_family" in c and c["holm_family"].notna().any():
        return str(c["holm_family"].dropna().iloc[0])
    return f"Holm over the {int(c['p'].notna().sum())} comparisons with {tables.reference}"


def _mean_sd(mean: float, sd: float, digits: int) -> str:
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if np.isfinite(sd) else f"{mean:.{digits}f}"


def _diff_ci(row: pd.Series, digits: int) -> str:
    diff = f"{row['mean_diff']:+.{digits}f}"
    if np.isfinite(row["ci_low"]) and np.isfinite(row["ci_high"]):
        return f"{diff} [{row['ci_low']:+.{digits}f}, {row['ci_high']:+.{digits}f}]"
    return f"{diff} (no CI: {row['verdict']})"


def _p(value: float) -> str:
    return "—" if not np.isfinite(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")
