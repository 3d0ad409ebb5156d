"""The results table as the statistics read it: loading and checking results.csv against the records,
the runs that finished, per-strategy summaries with t intervals, and the rate of degenerate runs."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from typhoon.analysis.significance import t_ci
from typhoon.masking import arm_label
from typhoon.records import LOSS_COLUMNS, RUN_KEYS

GROUP_KEYS = ["task", "backbone"]


_RESULT_COLUMNS = [*RUN_KEYS, "status", "primary_value"]  # what the statistics read from results.csv


def arms(results: pd.DataFrame) -> pd.DataFrame:
    """``results`` as the statistics read it: one ``strategy`` column naming the compared arm, a strategy
    under a schedule (:func:`typhoon.masking.params.arm_label`: ``random`` under the default schedule,
    ``random+uniform`` under another), and no ``schedule`` column.

    results.csv is tidy (a ``schedule`` column beside the strategy); the statistics compare arms, so each
    schedule of a strategy is its own arm and every summary and comparison is the one it was before the
    column existed. A table without a ``schedule`` column already names arms and is returned as it is
    (that also makes this idempotent); a row whose schedule is missing is refused, naming it.
    """
    if "schedule" not in results.columns:
        return results
    missing = results["schedule"].isna()
    if missing.any():
        rows = results.loc[missing, [c for c in RUN_KEYS if c in results.columns]].head(5).to_dict("records")
        raise ValueError(f"results has a schedule column but no schedule for {int(missing.sum())} run(s), e.g. "
                         f"{rows}: rebuild results.csv from the records (python -m typhoon reproduce ...)")
    frame = results.drop(columns="schedule")
    frame["strategy"] = [arm_label(str(strategy), str(schedule))
                         for strategy, schedule in zip(results["strategy"], results["schedule"], strict=True)]
    return frame


# --------------------------------------------------------------------------------------------------
# input handling
# --------------------------------------------------------------------------------------------------
def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str = "results") -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} is missing column(s) {missing}; has {list(df.columns)}")


def load_results(path: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                 tidy: bool = False) -> pd.DataFrame:
    """Read ``results.csv`` and check it has the columns the statistics need and, when its folder
    (``out_dir``, default the file's own) holds run records, one row per record (:func:`check_against_records`):
    a truncated or stale table is refused with a ValueError naming the file, never summarised.

    The table comes as the statistics compare it (:func:`arms`: ``strategy`` names the arm), or with
    ``tidy`` as it is written (``strategy`` and ``schedule`` apart: :mod:`typhoon.studies.schedules.analysis`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"results table not found: {path}")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a readable results table: {err}") from None
    require_columns(df, _RESULT_COLUMNS, what=str(path))
    check_against_records(df, Path(out_dir) if out_dir is not None else path.parent, path)
    return df if tidy else arms(df)


def check_against_records(results: pd.DataFrame, out_dir: Path, path: str | os.PathLike = "results.csv") -> None:
    """ValueError naming ``path`` when its rows and the run records under ``out_dir/runs`` disagree: a record
    without a row, or an ok row without a record. A folder with no records (a copied table) is not checked."""
    found = sorted(Path(out_dir).glob("runs/*/*/*/seed*/metrics.json"))
    if not found:
        return
    if "record_path" not in results.columns:
        raise ValueError(f"{path} has no record_path column, so its rows cannot be matched with the records in "
                         f"{out_dir}/runs; has {list(results.columns)}")
    on_disk = {p.parent.relative_to(out_dir).as_posix() for p in found}
    listed = set(results["record_path"].dropna().astype(str))
    ok = set(results.loc[results["status"].astype(str) == "ok", "record_path"].dropna().astype(str))
    unlisted, missing = sorted(on_disk - listed), sorted(ok - on_disk)
    if unlisted or missing:
        parts = ([f"{len(unlisted)} record(s) have no row (e.g. {unlisted[0]})"] if unlisted else []) + \
                ([f"{len(missing)} ok row(s) have no record (e.g. {missing[0]})"] if missing else [])
        raise ValueError(f"{path} does not match the run records beside it ({len(results)} rows, {len(on_disk)} "
                         f"records): {'; '.join(parts)}. A truncated or stale table: rebuild it with "
                         "`python -m typhoon reproduce --profile <profile> --out <folder>` (finished records are kept)")


def ok_runs(results: pd.DataFrame, extra_columns: Iterable[str] = ()) -> pd.DataFrame:
    """Rows with ``status == "ok"`` and a finite ``primary_value``; validated, one row per run, ``strategy``
    naming its arm (:func:`arms`)."""
    require_columns(results, [*_RESULT_COLUMNS, *extra_columns])
    results = arms(results)
    df = results.loc[results["status"].astype(str) == "ok"].copy()
    df["primary_value"] = pd.to_numeric(df["primary_value"], errors="coerce")
    bad = df["primary_value"].isna()
    if bad.any():
        rows = df.loc[bad, RUN_KEYS].to_dict("records")
        raise ValueError(f"status 'ok' but primary_value missing/non-numeric for runs {rows}")
    dup = df.duplicated(RUN_KEYS, keep=False)
    if dup.any():
        rows = df.loc[dup, RUN_KEYS].drop_duplicates().to_dict("records")
        raise ValueError(f"duplicated runs (same task, backbone, strategy, seed): {rows}")
    for col in ("task", "backbone", "strategy"):
        df[col] = df[col].astype(str)
    return df.reset_index(drop=True)


def strategy_order(strategies: Iterable[str], reference: str | None) -> list[str]:
    """Reference first, the rest in order of first appearance."""
    seen = list(dict.fromkeys(strategies))
    if reference is not None and reference in seen:
        seen.remove(reference)
        seen.insert(0, reference)
    return seen


def metric_of(df: pd.DataFrame) -> str:
    if "primary_metric" not in df.columns:
        return ""
    vals = df["primary_metric"].dropna().astype(str).unique()
    return ",".join(sorted(vals))


def summarize(results: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per (task, backbone, strategy): ``n`` seeds, ``mean``, ``sd`` (ddof=1), ``sem`` and the t-based
    ``ci_low``/``ci_high`` of the mean of ``primary_value`` (``status == "ok"`` runs only).

    With one seed ``sd``, ``sem`` and the CI are NaN. Also reports ``n_failed`` (runs not ok).
    """
    results = arms(results)
    df = ok_runs(results)
    rows = []
    for (task, backbone, strategy), g in df.groupby(["task", "backbone", "strategy"], sort=False):
        v = g["primary_value"].to_numpy(float)
        n = len(v)
        mean = float(v.mean())
        sd = float(v.std(ddof=1)) if n > 1 else math.nan
        sem = sd / math.sqrt(n) if n > 1 else math.nan
        lo, hi = t_ci(mean, sem, n - 1, confidence)
        rows.append(
            dict(task=task, backbone=backbone, strategy=strategy, primary_metric=metric_of(g), n=n,
                 mean=mean, sd=sd, sem=sem, ci_low=lo, ci_high=hi)
        )
    out = pd.DataFrame(rows, columns=["task", "backbone", "strategy", "primary_metric", "n", "mean", "sd",
                                      "sem", "ci_low", "ci_high"])
    failed = results.loc[results["status"].astype(str) != "ok"]
    nf = failed.astype({c: str for c in ("task", "backbone", "strategy")}).groupby(
        ["task", "backbone", "strategy"]).size()
    out["n_failed"] = [int(nf.get((r.task, r.backbone, r.strategy), 0)) for r in out.itertuples()]
    out["confidence"] = confidence
    return out


def degenerate_rate(results: pd.DataFrame, tol: float = 1e-6) -> pd.DataFrame:
    """Share of runs whose dev metric is at or below the majority-class level (Mosbach et al., 2021).

    A run is degenerate when ``primary_value <= majority_value + tol`` (``tol`` absorbs float noise;
    raise it to also count runs that are barely above the majority baseline). Columns: task, backbone,
    strategy, n (ok runs), n_degenerate, rate, n_failed (runs whose status is not ok, not in n).
    """
    require_columns(results, ["majority_value"])
    results = arms(results)
    df = ok_runs(results, extra_columns=["majority_value"])
    maj = pd.to_numeric(df["majority_value"], errors="coerce")
    if maj.isna().any():
        rows = df.loc[maj.isna(), ["task", "backbone", "strategy", "seed"]].to_dict("records")
        raise ValueError(f"majority_value missing for runs {rows}")
    df["degenerate"] = df["primary_value"] <= maj + tol
    failed = results.loc[results["status"].astype(str) != "ok"].astype(
        {c: str for c in ("task", "backbone", "strategy")}).groupby(["task", "backbone", "strategy"]).size()
    rows = []
    for (task, backbone, strategy), g in df.groupby(["task", "backbone", "strategy"], sort=False):
        nd = int(g["degenerate"].sum())
        rows.append(dict(task=task, backbone=backbone, strategy=strategy, n=len(g), n_degenerate=nd,
                         rate=nd / len(g), majority_value=float(pd.to_numeric(g["majority_value"]).mean()),
                         n_failed=int(failed.get((task, backbone, strategy), 0))))
    return pd.DataFrame(rows)


def require_plottable(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """``df`` has ``columns`` and at least one row (a figure or table drawn from it has something to show)."""
    require_columns(df, columns, what)
    if df.empty:
        raise ValueError(f"{what} is empty: nothing to plot")


def load_loss_curves(results: pd.DataFrame, out_dir: str | os.PathLike, strict: bool = False) -> pd.DataFrame:
    """Read ``<out_dir>/<record_path>/mlm_loss.csv`` of every ok run into one tidy frame with columns
    ``task, backbone, strategy, seed, step, epoch, split, loss``. Runs without the file are skipped
    (``strict=True``: FileNotFoundError); the names of skipped runs are in ``.attrs["missing"]``."""
    require_plottable(results, ["task", "backbone", "strategy", "seed", "status", "record_path"], "results")
    ok = results[results["status"].astype(str) == "ok"]
    frames, missing = [], []
    for r in ok.itertuples():
        path = Path(out_dir) / str(r.record_path) / "mlm_loss.csv"
        if not path.is_file():
            if strict:
                raise FileNotFoundError(path)
            missing.append(str(r.record_path))
            continue
        f = pd.read_csv(path)
        bad = [c for c in LOSS_COLUMNS if c not in f.columns]
        if bad:
            raise ValueError(f"{path} is missing column(s) {bad}")
        f = f[LOSS_COLUMNS].copy()
        f.insert(0, "seed", r.seed)
        f.insert(0, "strategy", str(r.strategy))
        f.insert(0, "backbone", str(r.backbone))
        f.insert(0, "task", str(r.task))
        frames.append(f)
    cols = [*RUN_KEYS, *LOSS_COLUMNS]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    out.attrs["missing"] = missing
    return out


def margin_text(comparisons: pd.DataFrame) -> str:
    """The TOST margin of the comparisons: '±0.01', or '±0.01 on mrpc, ±0.02 on cola' where the tasks'
    margins differ (each task's registered margin, :func:`typhoon.profiles.task_margins`)."""
    per_task = comparisons.groupby("task", sort=False)["margin"].first().astype(float)
    if per_task.nunique() <= 1:
        return f"±{per_task.iloc[0]:g}" if len(per_task) else "±margin"
    return ", ".join(f"±{m:g} on {task}" for task, m in per_task.items())


def task_margin(margins: float | Mapping[str, float], task: str) -> float:
    """The margin of ``task``: ``margins`` itself when it is a number, else its value for the task; ValueError
    naming the task and the tasks it has when it has none (never a default: a margin is a decision)."""
    if not isinstance(margins, Mapping):
        return float(margins)
    if str(task).lower() not in margins:
        raise ValueError(f"no equivalence margin for task {task!r} (margins for {sorted(margins)}): give one, e.g. "
                         f"margin={{{str(task).lower()!r}: 0.01}}, or in the profile's [<name>.analysis] margin")
    return float(margins[str(task).lower()])
