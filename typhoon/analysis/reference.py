"""Your run against the reference: how a reproduction's numbers compare with the committed reference run
of the same profile and backbone (:func:`reference_for`). This is the question a reproduction exists to answer.

Three levels, each a tidy table (written to ``stats/reference_*.csv`` by notebook ``25_reference``):

1. **Per cell** (:func:`compare_cells`): the dev metric here and in the reference, and whether the record is
   bit-identical to the reference's. Bit-identity is expected only where what decides the bits matches
   (:class:`typhoon.records.run_numerics.BitSource`: precision, device kind, the CPU's vendor and kernel family,
   the attention and dropout kernels, the torch build); elsewhere every number the record computed (dev metrics,
   training and MLM losses) is compared within :data:`TOLERANCE`, and the table gives the largest difference.
   Records made before a RunConfig field existed read it at its default (:func:`fields_read_at_default`).
2. **Per task × backbone × strategy** (:func:`compare_means`): whether this run's mean agrees with the
   reference's within the seed-to-seed noise. The criterion, stated before the data: the paired
   difference by seed (this run − reference) has a 90 % t interval (TOST at 5 %) inside ±margin ->
   ``agrees``; entirely outside -> ``disagrees``; otherwise ``not decided``. A strategy with one seed in both
   runs is one pair: no interval, so no verdict (``one pair``), and the summary says how that pair compares
   instead (bit-identical, or its difference). The margin
   (:func:`agreement_margins`) is the reference's own seed-to-seed sd of the dev metric for that task,
   pooled over strategies, and never below the study's 0.01: a reproduction whose mean moves by less than
   one seed sd moves less than re-running one seed of the reference does, which a 3-seed study cannot
   tell from nothing.
3. **The conclusions** (:func:`compare_conclusions`): each of the paper's claims and each strategy
   comparison's verdict, here and in the reference, and whether they come out the same.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from typhoon import atomic, paths
from typhoon.analysis import paper_claims, run_summary, stats_tables
from typhoon.analysis.output_tables import read_tables
from typhoon.config import FIELD_TYPES, PLUGIN_FIELDS, RunConfig
from typhoon.profiles import get_profile
from typhoon.records import RUN_KEYS, bit_source_of_metrics, read_json

MIN_MARGIN = 0.01  # the study's own margin of a difference that matters (stats.DEFAULT_MARGIN)
ALPHA = 0.05  # TOST at 5 %: the 90 % interval
AGREES, DISAGREES, NOT_DECIDED = "agrees", "disagrees", "not decided"
# one seed in both runs: one paired difference, no interval; not "not decided", which would read as a doubt
# about a pair that may well be bit-identical
ONE_PAIR = "one pair"
# Two records of other numerics (another CPU vendor, kernel family, precision or torch build) agree when every
# number they computed is within this of the other's: the dev metrics and losses, the difference taken relative to
# the value where that is above 1 (an MLM loss of 10 nats), absolute below. Another summation order moves an fp32
# loss by about 1e-6; a real change of the computation moves a dev metric by a whole example (1e-3 and more).
TOLERANCE = 1e-5
TOLERANCE_TEXT = "1e-5"
IDENTICAL, SAME_NUMERICS_DIFFER, OTHER_NUMERICS = "bit-identical", "differs (same numerics)", "differs (other numerics)"
WITHIN_TOLERANCE = f"within {TOLERANCE_TEXT} (other numerics)"
# other numerics, yet the same dev metric to the last bit: "differs" would be read as "the number differs"
EQUAL_VALUE_OTHER_NUMERICS = "equal value, other numerics"
MISSING_HERE, MISSING_IN_REFERENCE, NOT_OK = "missing here", "missing in reference", "not ok"
TABLES = ("reference_cells", "reference_means", "reference_conclusions")


def reference_for(profile: str, out_dir: str | os.PathLike) -> Path | None:
    """The committed reference run of ``profile`` with the backbones of the run in ``out_dir``, or None.

    A profile may have one reference per backbone (``results/cpu`` trained the fresh-head ``minilm-l6``,
    ``results/cpu-mlm`` the MLM-adapted ``minilm-l6-mlm``): a folder under ``<repo>/results/`` is the
    reference when its ``MANIFEST.json`` names the profile and its ``results.csv`` holds the same backbones as
    the run's (the profile's own backbones when the run has no table yet). Comparing runs of two backbones
    would report the backbone's effect as a failed reproduction. Never ``out_dir`` itself (refreshing a
    reference compares it with nothing)."""
    wanted = _backbones(Path(out_dir)) or set(get_profile(profile).backbones)
    for folder in sorted((paths.repo_root() / "results").glob("*/")):
        if folder.resolve() == Path(out_dir).resolve() or not (folder / "results.csv").is_file():
            continue
        manifest = read_json(folder / paths.MANIFEST) or {}
        if manifest.get("profile", folder.name) == profile and _backbones(folder) == wanted:
            return folder
    return None


def no_reference_note(profile: str, out_dir: str | os.PathLike) -> str | None:
    """Why a run has no reference to be compared with when ``results/<profile>`` exists but trained another
    backbone (None when there is nothing to say): the reader learns it was not compared, and why."""
    other = paths.reference_dir(profile)
    if not (other / "results.csv").is_file() or other.resolve() == Path(out_dir).resolve():
        return None
    here = sorted(_backbones(Path(out_dir)) or get_profile(profile).backbones)
    return (f"your run against the reference: not compared: no committed {profile} run of {', '.join(here)} "
            f"under results/ yet ({paths.shown(other)} trained {', '.join(sorted(_backbones(other)))})")


def _backbones(folder: Path) -> set[str]:
    """The backbones of a run's ``results.csv``; empty when it has none (or no such column)."""
    table = folder / "results.csv"
    if not table.is_file():
        return set()
    return set(pd.read_csv(table, usecols=lambda column: column == "backbone").get("backbone", pd.Series(dtype=str)))


def read_results(folder: Path) -> pd.DataFrame:
    """A folder's ``results.csv`` with ``strategy`` naming each run's arm (strategy and schedule:
    :func:`typhoon.analysis.run_summary.arms`, so a run is one row per RUN_KEYS as in the statistics);
    FileNotFoundError naming it when missing, ValueError when it lacks columns."""
    path = Path(folder) / "results.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{paths.shown(path)} not found: is {paths.shown(folder)} a finished reproduce?")
    frame = pd.read_csv(path)
    missing = sorted({*RUN_KEYS, "status", "primary_metric", "primary_value", "record_path"} - set(frame.columns))
    if missing:
        raise ValueError(f"{paths.shown(path)} is not a results table: missing column(s) {missing}")
    return run_summary.arms(frame)


def _record(folder: Path, record_path: str) -> tuple[dict | None, bytes | None]:
    run_dir = Path(folder) / record_path
    loss = run_dir / "mlm_loss.csv"
    return read_json(run_dir / "metrics.json"), loss.read_bytes() if loss.is_file() else None


def _numbers(metrics: dict, loss: bytes | None) -> dict[str, float]:
    """Every number a record computed, by name: the final and per-epoch dev metrics and training loss, and
    each row of its MLM loss curve."""
    final, epochs = _computed_numbers(metrics)
    found = {f"final {k}": v for k, v in (final or {}).items()}
    found |= {f"epoch {e.get('epoch', i)} {k}": v for i, e in enumerate(epochs) for k, v in e.items() if k != "epoch"}
    if loss:
        import io

        curve = pd.read_csv(io.BytesIO(loss))
        keys = [c for c in curve.columns if c != "loss"]
        found |= {"mlm " + " ".join(str(r[k]) for k in keys): r["loss"] for r in curve.to_dict("records")}
    return {k: float(v) for k, v in found.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def largest_difference(a: dict, a_loss: bytes | None, b: dict, b_loss: bytes | None) -> float:
    """The largest difference between two records' computed numbers (:func:`_numbers`), relative to ``b``'s
    value where it is above 1 in size; infinite when one computed a number the other lacks (another epoch
    count, another loss curve)."""
    here, there = _numbers(a, a_loss), _numbers(b, b_loss)
    if here.keys() != there.keys():
        return math.inf
    gaps = [abs(here[k] - there[k]) / max(1.0, abs(there[k])) for k in here]
    return max(gaps, default=0.0) if all(map(math.isfinite, gaps)) else math.inf


def fields_read_at_default(folder: Path, record_paths) -> dict[str, object]:
    """The RunConfig fields that the records' ``config.json`` lack (written before the field existed), each with
    the default it is read at (``RunConfig.from_dict``: a record ran with the default of a field it predates)."""
    missing: set[str] = set()
    for record_path in record_paths:
        stored = read_json(Path(folder) / record_path / "config.json")
        if isinstance(stored, dict):
            missing |= set(FIELD_TYPES) - set(PLUGIN_FIELDS) - set(stored)
    declared = {f.name: f for f in dataclasses.fields(RunConfig)}
    return {name: declared[name].default if declared[name].default is not dataclasses.MISSING
            else declared[name].default_factory() for name in sorted(missing)}


def _computed_numbers(metrics: dict) -> tuple:
    """What a record computed (not how long it took): the final dev metrics and, per epoch, the dev
    metrics and the training loss."""
    epochs = [{k: v for k, v in e.items() if k.startswith("dev_") or k in ("epoch", "train_loss")}
              for e in metrics.get("epochs", [])]
    return metrics.get("final"), epochs


def _same_numbers(a: dict, b: dict) -> bool:
    """Whether two records' computed numbers are equal bit for bit (:func:`_computed_numbers`)."""
    return _computed_numbers(a) == _computed_numbers(b)


def compare_cells(run_dir: str | os.PathLike, ref_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per cell of either run: the dev metric here and in the reference, what decided their bits
    (:class:`typhoon.records.run_numerics.BitSource`), the largest difference of any number they computed
    (:func:`largest_difference`) and the status: bit-identical / differs with the same numerics (a warning:
    these should be equal) / within :data:`TOLERANCE` with other numerics / the same dev metric with other
    numerics, whose record differs beyond it elsewhere / differs with other numerics / missing."""
    run, ref = read_results(Path(run_dir)), read_results(Path(ref_dir))
    merged = run.merge(ref, on=RUN_KEYS, how="outer", suffixes=("_run", "_ref"), indicator=True)
    rows = []
    for r in merged.to_dict("records"):
        row = {k: r[k] for k in RUN_KEYS}
        row["metric"] = r.get("primary_metric_run") if isinstance(r.get("primary_metric_run"), str) else r.get("primary_metric_ref")
        row["run_value"], row["reference_value"] = r.get("primary_value_run"), r.get("primary_value_ref")
        row["difference"] = row["run_value"] - row["reference_value"]
        run_m, run_loss = (_record(run_dir, r["record_path_run"]) if r["_merge"] != "right_only" else (None, None))
        ref_m, ref_loss = (_record(ref_dir, r["record_path_ref"]) if r["_merge"] != "left_only" else (None, None))
        sources = [bit_source_of_metrics(m) if m and m.get("status") == "ok" else None for m in (run_m, ref_m)]
        row["run_numerics"], row["reference_numerics"] = (source.label if source else None for source in sources)
        row["same_numerics"] = None not in sources and sources[0].same_bits_expected(sources[1])
        row["largest_difference"] = (largest_difference(run_m, run_loss, ref_m, ref_loss) if None not in sources
                                     else math.nan)
        row["reused_from"] = (run_m or {}).get("reused_from", {}).get("record") if run_m else None
        if r["_merge"] == "right_only":
            row["status"] = MISSING_HERE
        elif r["_merge"] == "left_only":
            row["status"] = MISSING_IN_REFERENCE
        elif r.get("status_run") != "ok" or r.get("status_ref") != "ok":
            row["status"] = NOT_OK
        elif _same_numbers(run_m, ref_m) and run_loss == ref_loss:
            row["status"] = IDENTICAL
        else:
            row["status"] = (SAME_NUMERICS_DIFFER if row["same_numerics"]
                             else WITHIN_TOLERANCE if row["largest_difference"] <= TOLERANCE
                             else EQUAL_VALUE_OTHER_NUMERICS if row["difference"] == 0 else OTHER_NUMERICS)
        rows.append(row)
    columns = [*RUN_KEYS, "metric", "run_value", "reference_value", "difference", "status", "largest_difference",
               "same_numerics", "run_numerics", "reference_numerics", "reused_from"]
    return pd.DataFrame(rows, columns=columns).sort_values(RUN_KEYS).reset_index(drop=True)


def agreement_margins(ref: pd.DataFrame) -> pd.DataFrame:
    """Per task × backbone: the margin within which this run's mean counts as agreeing with the
    reference's: the reference's seed-to-seed sd of the dev metric, pooled over its strategies (the root
    of the mean within-strategy variance), and never below :data:`MIN_MARGIN`. Where no strategy has two seeds
    there is no sd (NaN, an empty cell in the CSV and in :meth:`ReferenceComparison.margins_table`) and ``note``
    says so; the margin is then :data:`MIN_MARGIN`."""
    ok = ref[ref["status"].astype(str) == "ok"]
    rows = []
    for (task, backbone), group in ok.groupby(["task", "backbone"]):
        variances = group.groupby("strategy")["primary_value"].var(ddof=1).dropna()
        pooled = float(np.sqrt(variances.mean())) if len(variances) else None
        margin = max(MIN_MARGIN, pooled) if pooled is not None else MIN_MARGIN
        note = (f"one seed per strategy: no sd; the margin is the study's {MIN_MARGIN}" if pooled is None
                else f"the study's {MIN_MARGIN} (above the sd)" if margin > pooled else "the sd")
        rows.append(dict(task=task, backbone=backbone, reference_seed_sd=math.nan if pooled is None else pooled,
                         margin=margin, note=note))
    return pd.DataFrame(rows, columns=["task", "backbone", "reference_seed_sd", "margin", "note"])


def paired_interval(differences: np.ndarray, alpha: float = ALPHA) -> tuple[float, float, float]:
    """(mean, low, high) of the (1 − 2·alpha) t interval of paired differences (TOST at ``alpha``); a
    constant sample (e.g. every cell bit-identical) has the zero-width interval at its value."""
    d = np.asarray(differences, float)
    mean = float(d.mean())
    if d.size < 2:
        return mean, math.nan, math.nan
    sd = float(d.std(ddof=1))
    half = float(scipy_stats.t.ppf(1 - alpha, d.size - 1)) * sd / math.sqrt(d.size) if sd > 0 else 0.0
    return mean, mean - half, mean + half


def verdict(low: float, high: float, margin: float) -> str:
    """``agrees`` when [low, high] lies inside ±margin, ``disagrees`` when it lies wholly outside, else
    ``not decided`` (also when there is no interval)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return NOT_DECIDED
    if -margin < low and high < margin:
        return AGREES
    if low >= margin or high <= -margin:
        return DISAGREES
    return NOT_DECIDED


def compare_means(cells: pd.DataFrame, margins: pd.DataFrame) -> pd.DataFrame:
    """Per task × backbone × strategy: this run's and the reference's mean over the seeds both have, the
    paired difference with its 90 % interval, the margin and the verdict (see the module's criterion;
    :data:`ONE_PAIR` where both have one seed)."""
    both = cells[cells["run_value"].notna() & cells["reference_value"].notna()]
    rows = []
    for (task, backbone, strategy), group in both.groupby(["task", "backbone", "strategy"], sort=True):
        found = margins[(margins["task"] == task) & (margins["backbone"] == backbone)]
        margin = float(found["margin"].iloc[0]) if len(found) else MIN_MARGIN
        mean, low, high = paired_interval(group["difference"].to_numpy(float))
        rows.append(dict(task=task, backbone=backbone, strategy=strategy, metric=group["metric"].iloc[0],
                         n_pairs=len(group), run_mean=group["run_value"].mean(),
                         reference_mean=group["reference_value"].mean(), mean_difference=mean,
                         ci90_low=low, ci90_high=high, margin=margin,
                         identical_cells=int((group["status"] == IDENTICAL).sum()),
                         verdict=verdict(low, high, margin) if len(group) >= 2 else ONE_PAIR))
    columns = ["task", "backbone", "strategy", "metric", "n_pairs", "run_mean", "reference_mean", "mean_difference",
               "ci90_low", "ci90_high", "margin", "identical_cells", "verdict"]
    return pd.DataFrame(rows, columns=columns)


def compare_conclusions(run_dir: str | os.PathLike, ref_dir: str | os.PathLike) -> pd.DataFrame:
    """Each of the paper's claims (:func:`typhoon.analysis.paper_claims.claims_table`) and each strategy comparison's
    verdict (``stats/comparisons.csv``), in this run and in the reference, and whether they agree. Empty
    when either run has no statistics yet (notebook 20 makes them)."""
    try:
        tables = [read_tables(folder) for folder in (run_dir, ref_dir)]
    except FileNotFoundError:
        return pd.DataFrame(columns=["kind", "conclusion", "run", "reference", "same"])
    claims = [paper_claims.claims_table(t).set_index("claim")["verdict"] for t in tables]
    rows = [dict(kind="claim", conclusion=claim, run=claims[0].get(claim), reference=claims[1].get(claim))
            for claim in dict.fromkeys([*claims[1].index, *claims[0].index])]
    keys = ["task", "backbone", "strategy_a", "strategy_b"]
    verdicts = [t.comparisons.set_index(keys)["verdict"] if len(t.comparisons) else pd.Series(dtype=str) for t in tables]
    for key in dict.fromkeys([*verdicts[1].index, *verdicts[0].index]):
        rows.append(dict(kind="comparison", conclusion=f"{key[0]}/{key[1]}: {key[2]} − {key[3]}",
                         run=verdicts[0].get(key), reference=verdicts[1].get(key)))
    frame = pd.DataFrame(rows, columns=["kind", "conclusion", "run", "reference"])
    frame = frame[frame["run"].notna() & frame["reference"].notna()]  # made in both runs (the same grid)
    frame["same"] = frame["run"] == frame["reference"]
    return frame.reset_index(drop=True)


@dataclass
class ReferenceComparison:
    """The three tables of :func:`compare_with_reference` and the folders they compare."""

    run_dir: Path
    ref_dir: Path
    cells: pd.DataFrame
    margins: pd.DataFrame
    means: pd.DataFrame
    conclusions: pd.DataFrame
    # per side ("this run", "the reference"): the RunConfig fields its records predate, at their defaults
    read_at_default: dict = field(default_factory=dict)

    def margins_table(self) -> pd.DataFrame:
        """The margins as a reader sees them: numbers to 4 digits, an empty cell where there is no sd (one seed
        per strategy), which ``note`` says."""
        shown = self.margins.copy()
        for column in ("reference_seed_sd", "margin"):
            shown[column] = [f"{v:.4f}" if math.isfinite(v) else "" for v in shown[column]]
        return shown

    def numerics_lines(self) -> list[str]:
        """What the cells' numerics say: where they differ from the reference's, whether every number agrees
        within :data:`TOLERANCE`; where they match and the bits do not, a warning."""
        lines = []
        other = self.cells[self.cells["status"].isin([WITHIN_TOLERANCE, EQUAL_VALUE_OTHER_NUMERICS, OTHER_NUMERICS])]
        if len(other):
            pairs = other.groupby(["run_numerics", "reference_numerics"]).size()
            (here, there), _ = next(iter(pairs.items()))
            more = f" (and {len(pairs) - 1} other pairing(s): reference_cells.csv)" if len(pairs) > 1 else ""
            lines.append(f"  numerics: this run {here}; the reference {there}{more}: bit-identity is not "
                         "expected, each cell's numbers are compared within a tolerance")
            largest = float(other["largest_difference"].max())
            if largest <= TOLERANCE:
                lines.append(f"  {len(other)} cell(s) of other numerics: each agrees within {TOLERANCE_TEXT} on every "
                             f"metric and loss (largest difference {largest:.1e})")
            else:
                within = int((other["largest_difference"] <= TOLERANCE).sum())
                lines.append(f"  {len(other)} cell(s) of other numerics: {within} agree within {TOLERANCE_TEXT} on every "
                             f"metric and loss, {len(other) - within} differ by more (largest {largest:.1e}); the "
                             "means below judge them against the seed-to-seed noise")
        if (self.cells["status"] == SAME_NUMERICS_DIFFER).any():
            lines.append("  WARNING: some cells ran with the reference's numerics (CPU vendor and kernels, precision, "
                         "torch build) but are not bit-identical")
        for side, fields in self.read_at_default.items():
            if fields:
                lines.append(f"  {side}'s records predate field(s) {', '.join(fields)}: read at their defaults ("
                             + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")")
        return lines

    def summary(self) -> str:
        """A few lines for the end of ``reproduce``: cells, their numerics, means, conclusions."""
        status = self.cells["status"].value_counts().to_dict()
        lines = [f"your run against the reference ({paths.shown(self.ref_dir)}):",
                 "  cells: " + ", ".join(f"{n} {s}" for s, n in sorted(status.items())), *self.numerics_lines()]
        judged, single = self.means[self.means["verdict"] != ONE_PAIR], self.means[self.means["verdict"] == ONE_PAIR]
        if len(judged):
            counts = judged["verdict"].value_counts().to_dict()
            lines.append("  means (paired by seed, 90 % CI inside ±margin = agrees): "
                         + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) + f" of {len(judged)}"
                         + (" with two or more seeds" if len(single) else ""))
            for r in judged[judged["verdict"] != AGREES].itertuples():
                lines.append(f"    {r.task}/{r.backbone}/{r.strategy}: {r.mean_difference:+.4f} "
                             f"[{r.ci90_low:+.4f}, {r.ci90_high:+.4f}] vs ±{r.margin:.3f}: {r.verdict}")
        if len(single):  # said by how its one pair of cells compares (the cells' status), never as a doubt
            paired = self.cells.dropna(subset=["run_value", "reference_value"]).set_index(["task", "backbone", "strategy"])
            lines.append(f"  {len(single)} of {len(self.means)} with one seed in both runs (one pair: no interval, "
                         "no verdict on the mean): "
                         + "; ".join(f"{r.task}/{r.backbone}/{r.strategy} {r.mean_difference:+.4f}, "
                                     + paired.loc[(r.task, r.backbone, r.strategy), "status"]
                                     for r in single.itertuples()))
        if len(self.conclusions):
            same = int(self.conclusions["same"].sum())
            lines.append(f"  conclusions: {same} of {len(self.conclusions)} the same as the reference's")
            for r in self.conclusions[~self.conclusions["same"]].itertuples():
                lines.append(f"    {r.conclusion}: here {r.run}, reference {r.reference}")
        else:
            lines.append("  conclusions: not compared (no statistics tables yet)")
        return "\n".join(lines)

    def write(self, stats_dir: Path) -> list[Path]:
        """``reference_cells``, ``reference_means`` (with the margins) and ``reference_conclusions``, as CSV
        and markdown, each written atomically."""
        written = []
        for name, frame in zip(TABLES, (self.cells, self.means, self.conclusions), strict=True):
            for suffix, text in ((".csv", frame.to_csv(index=False)), (".md", stats_tables.markdown_table(frame.round(4)) + "\n")):
                path = Path(stats_dir) / f"{name}{suffix}"
                atomic.atomic_write_text(path, text)
                written.append(path)
        return written


def compare_with_reference(run_dir: str | os.PathLike, ref_dir: str | os.PathLike) -> ReferenceComparison:
    """All three comparisons of ``run_dir`` (a finished reproduce) with the reference run ``ref_dir``."""
    run_dir, ref_dir = Path(run_dir).resolve(), Path(ref_dir).resolve()
    cells = compare_cells(run_dir, ref_dir)
    ref = read_results(ref_dir)
    margins = agreement_margins(ref)
    read_at_default = {side: fields_read_at_default(folder, table["record_path"].dropna())
                       for side, folder, table in (("this run", run_dir, read_results(run_dir)),
                                                   ("the reference", ref_dir, ref))}
    return ReferenceComparison(run_dir, ref_dir, cells, margins, compare_means(cells, margins),
                               compare_conclusions(run_dir, ref_dir), read_at_default)


def plot_against_reference(comparison: ReferenceComparison, out_path: str | os.PathLike) -> list[Path]:
    """Two panels, saved as PNG + SVG: each cell's dev metric here against the reference's (on the
    diagonal when bit-identical), and each strategy's paired mean difference with its 90 % interval
    against the ±margin band."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from typhoon.figure_style import save_figure

    cells, means = comparison.cells.dropna(subset=["run_value", "reference_value"]), comparison.means
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (task, metric), group in cells.groupby(["task", "metric"]):
        left.scatter(group["reference_value"], group["run_value"], label=f"{task} ({metric})", s=28)
    if len(cells):
        lo = float(min(cells["run_value"].min(), cells["reference_value"].min()))
        hi = float(max(cells["run_value"].max(), cells["reference_value"].max()))
        left.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--", label="identical")
        left.legend(fontsize=8)
    left.set(xlabel="reference dev metric", ylabel="this run's dev metric", title="Per cell")
    several = means["backbone"].nunique() > 1
    labels = [f"{r.task}/{r.backbone}/{r.strategy}" if several else f"{r.task}/{r.strategy}" for r in means.itertuples()]
    y = np.arange(len(means))
    right.errorbar(means["mean_difference"], y, xerr=[means["mean_difference"] - means["ci90_low"],
                                                     means["ci90_high"] - means["mean_difference"]],
                   fmt="o", capsize=3)
    for i, margin in enumerate(means["margin"]):
        right.fill_betweenx([i - 0.4, i + 0.4], -margin, margin, color="tab:green", alpha=0.15, lw=0)
    right.axvline(0, color="grey", lw=1)
    right.set_yticks(y, labels)
    right.xaxis.set_major_locator(MaxNLocator(5))
    right.set(xlabel="this run − reference (paired by seed), 90 % CI; band: ±margin", title="Per strategy")
    fig.tight_layout()
    saved = save_figure(fig, out_path, caption="Left: each cell's dev metric in this run against the reference "
                        "run's (on the dashed line when equal). Right: per strategy, this run's mean minus the "
                        "reference's, paired by seed, with its 90 % interval; green band: ±margin (agreement).")
    plt.close(fig)  # shown once, from the saved file with its caption
    return saved
