"""The decisive study: a profile with a pre-registered sequential design (``[<profile>.design]`` in
``profiles.toml``) whose ``reproduce`` (:mod:`typhoon.studies.sequential.policy`) trains only the seeds the
next look needs, for the arms of the comparisons still undecided, re-analyses (:mod:`typhoon.analysis.sequential`)
and stops when every comparison is equivalent, different or undecided at its cap. This module plans and
analyses; it trains nothing. The design it runs is read and printed by :mod:`typhoon.studies.sequential.design`.

The records on disk are the state: every invocation re-reads them, analyses the looks they reach (each
comparison stopped at its first decision) and plans the cells of the next look (:func:`plan_next_look`),
so a stopped run resumes where it was. Seeds 0-2 come from the records of the design's ``reuse_from``
(``results/cpu``, ``results/bottleneck``) where the RunConfig identity matches. The arms of one seed
share their numerics (a pair never mixes bf16 and fp32, nor AMX and AVX512-BF16 kernels):
:func:`check_seed_numerics` refuses to train a cell that would, ``stats/seeds.csv`` says which numerics
each seed used, and ``stats/verdicts.csv`` flags a comparison whose records pair mixed numerics anyway
(reused records), with its verdict without those seeds, and the power its cap has at the sd measured on
its seeds (:mod:`typhoon.studies.sequential.checks`).

Outputs under the output folder: ``stats/verdicts.csv`` (one row per comparison), ``stats/history.csv``
(every look), ``stats/design.csv``, ``stats/boundaries.csv``, ``stats/seeds.csv``,
``figures/decisive_looks.{png,svg}`` and the executed ``notebooks/50_decisive.ipynb``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from typhoon import atomic, paths
from typhoon.analysis import bottleneck_verdict, sequential
from typhoon.config import RunConfig
from typhoon.profiles import Profile
from typhoon.records import (
    RESULT_COLUMNS,
    Numerics,
    finished_record_of,
    is_complete,
    read_json,
    record_numerics_detail,
    result_row,
    reuse_record,
)
from typhoon.studies.sequential import checks as decisive_checks
from typhoon.studies.sequential.design import PRIMARY_METRIC, StudyDesign, design_table
from typhoon.training import numerics_here

NOTEBOOK = "50_decisive.ipynb"
HISTORY_COLUMNS = ["task", "metric", *sequential.LOOK_COLUMNS]
VERDICT_COLUMNS = ["task", "metric", "comparison", "n_seeds", "difference", "ci_low", "ci_high", "tost_low",
                   "tost_high", "margin", "verdict", "next_look_seeds", "task_model_accuracy", "task_model_learned"]


# --------------------------------------------------------------------------------------------------
# Analysis and planning (pure: from a results table)


def paired_differences(results: pd.DataFrame, study: StudyDesign, task: str) -> dict[str, np.ndarray]:
    """Per comparison of ``task``: the differences first − second of the primary metric for seeds
    0, 1, 2, ... as long as both arms have an ok record (the first seed missing ends the run of seeds)."""
    ok = results[(results["task"] == task) & (results["status"].astype(str) == "ok")]
    wide = ok.pivot_table(index="seed", columns="strategy", values="primary_value", aggfunc="first")
    out = {}
    for a, b in study.comparisons:
        values = []
        for seed in range(study.design.cap):
            if seed not in wide.index or any(s not in wide.columns or pd.isna(wide.at[seed, s]) for s in (a, b)):
                break
            values.append(float(wide.at[seed, a] - wide.at[seed, b]))
        out[study.name((a, b))] = np.array(values)
    return out


def analyse(results: pd.DataFrame, study: StudyDesign) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The history (every look each comparison reached, :func:`sequential.analyse_history`) and the
    verdicts (each comparison's last analysed look; ``continue`` with ``next_look_seeds`` where it
    needs more seeds, ``not started`` before its first look)."""
    histories, verdicts = [], []
    for task in study.tasks:
        diffs = paired_differences(results, study, task)
        history = sequential.analyse_history(diffs, study.design, {name: study.margins[task] for name in diffs})
        history.insert(0, "metric", PRIMARY_METRIC.get(task, "primary"))
        history.insert(0, "task", task)
        histories.append(history)
        for pair in study.comparisons:
            name = study.name(pair)
            rows = history[history["comparison"] == name]
            last = rows.iloc[-1].to_dict() if len(rows) else {"task": task, "metric": PRIMARY_METRIC.get(task),
                                                                "comparison": name, "n_seeds": len(diffs[name]),
                                                                "margin": study.margins[task], "verdict": "not started"}
            decided = last["verdict"] in ("equivalent", "different", "undecided at cap")
            last["next_look_seeds"] = None if decided else study.design.looks[len(rows)]
            used = results[(results["task"] == task) & results["strategy"].isin(pair)
                           & (results["seed"] < int(last.get("n_seeds") or 0))]
            last.update(bottleneck_verdict.task_model_summary(used))  # the task models behind the seeds this look used
            verdicts.append({c: last.get(c) for c in VERDICT_COLUMNS})
    history = pd.concat(histories, ignore_index=True)[HISTORY_COLUMNS]
    return history, pd.DataFrame(verdicts, columns=VERDICT_COLUMNS)


def with_checks(verdicts: pd.DataFrame, results: pd.DataFrame, study: StudyDesign,
                numerics: Mapping[tuple[str, str, int], Numerics], studies: int | None = None) -> pd.DataFrame:
    """``verdicts`` (:func:`analyse`) with the :data:`decisive_checks.CHECK_COLUMNS` of each comparison, from
    all its paired seeds on record and the numerics of its arms' records (``numerics``: by (task, strategy,
    seed), :func:`arm_numerics`): the power its cap has at the sd they measure, and the seeds whose pairs mix
    numerics, with the verdict without them."""
    pairs = {study.name(p): p for p in study.comparisons}
    diffs = {task: paired_differences(results, study, task) for task in study.tasks}
    rows = []
    for row in verdicts.itertuples():
        of_task = {(s, seed): n for (t, s, seed), n in numerics.items() if t == row.task}
        rows.append(decisive_checks.comparison_checks(diffs[row.task][row.comparison], pairs[row.comparison],
                                                      study.design, study.margins[row.task], of_task, studies))
    checks = pd.DataFrame(rows, columns=decisive_checks.CHECK_COLUMNS)
    checks["n_seeds_without_mixed"] = checks["n_seeds_without_mixed"].astype("Int64")  # a count, blank where none
    return pd.concat([verdicts.reset_index(drop=True), checks], axis=1)


def plan_next_look(results: pd.DataFrame, study: StudyDesign) -> pd.DataFrame:
    """The cells (task, strategy, seed) that the next look of the undecided comparisons needs and that
    have no ok record: the arms of each undecided comparison, seeds up to its next look. Empty when
    every comparison is decided or at its cap."""
    _, verdicts = analyse(results, study)
    ok = results[results["status"].astype(str) == "ok"]
    have = set(zip(ok["task"], ok["strategy"], ok["seed"].astype(int), strict=True))
    pairs = {study.name(p): p for p in study.comparisons}
    cells = {}
    for row in verdicts.itertuples():
        if row.next_look_seeds is None or pd.isna(row.next_look_seeds):
            continue
        for strategy in pairs[row.comparison]:
            for seed in range(int(row.next_look_seeds)):
                if (row.task, strategy, seed) not in have:
                    cells[(row.task, strategy, seed)] = None
    order = {s: i for i, s in enumerate(study.arms)}
    frame = pd.DataFrame(list(cells), columns=["task", "strategy", "seed"])
    frame["_t"] = frame["task"].map({t: i for i, t in enumerate(study.tasks)})
    frame["_s"] = frame["strategy"].map(order)
    return frame.sort_values(["seed", "_t", "_s"]).drop(columns=["_t", "_s"]).reset_index(drop=True)


# --------------------------------------------------------------------------------------------------
# Records: the state on disk


def grid_configs(profile: Profile, overrides: Mapping | None = None) -> dict[tuple, RunConfig]:
    """Every cell up to the cap, by (task, strategy, seed)."""
    return by_cell(profile.grid(overrides))


def by_cell(configs: Iterable[RunConfig]) -> dict[tuple, RunConfig]:
    """A sequential design's cells (``Profile.grid``) by (task, strategy, seed)."""
    return {(c.task, c.strategy, c.seed): c for c in configs}


def results_table(configs: Mapping[tuple, RunConfig], out_dir: Path) -> pd.DataFrame:
    """The results rows of the cells whose record in ``out_dir`` is complete for their config."""
    rows = []
    for config in configs.values():
        run_dir = out_dir / config.relative_dir()
        if is_complete(run_dir, config):
            rows.append(result_row(config, read_json(run_dir / "metrics.json"),
                                   config.relative_dir().as_posix()))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def reuse_sources(study: StudyDesign, configs: list[RunConfig], out_dir: Path) -> list[dict]:
    """Copy into ``out_dir`` the record of each cell that has none there from the first of the
    design's ``reuse_from`` folders holding a complete record with the same RunConfig identity (never
    for the strategies in ``never_reuse``). Returns one ``{record_path, reused_from}`` per copy."""
    copied = []
    sources = [paths.repo_root() / s for s in study.reuse_from]
    for config in configs:
        if config.strategy in study.never_reuse or is_complete(out_dir / config.relative_dir(), config):
            continue
        for source in sources:
            run_dir = source / config.relative_dir()
            if finished_record_of(run_dir, config) is None:
                continue
            # Named by the design, so taken across kernel families (AMX records beside AVX512-BF16 ones): a
            # pair of arms that this mixes is flagged in stats/verdicts.csv (mixed_seeds) with its verdict
            # without those seeds, and stats/seeds.csv says each seed's full numerics.
            reuse_record(config, out_dir, run_dir)
            copied.append({"record_path": config.relative_dir().as_posix(), "reused_from": paths.shown(run_dir)})
            break
    return copied


def arm_numerics(configs: Mapping[tuple, RunConfig], out_dir: Path) -> dict[tuple[str, str, int], Numerics]:
    """The numerics of each cell with a complete record, by (task, strategy, seed)."""
    found = {}
    for key, config in configs.items():
        run_dir = out_dir / config.relative_dir()
        numerics = record_numerics_detail(run_dir)
        if numerics is not None and is_complete(run_dir, config):
            found[key] = numerics
    return found


def seed_numerics(configs: Mapping[tuple, RunConfig], out_dir: Path) -> pd.DataFrame:
    """One row per (task, seed) with a record: the numerics its arms used (``"bf16 on cpu (amx), eager
    attention, fast dropout"``, ...), and whether they are ``mixed`` (any part differs, kernel family included)."""

    rows = {}
    for (task, _, seed), numerics in arm_numerics(configs, out_dir).items():
        rows.setdefault((task, seed), set()).add(numerics.key)
    # " + " between the labels: a label itself lists its parts with commas
    return pd.DataFrame([{"task": t, "seed": s, "numerics": " + ".join(sorted(v)), "mixed": len(v) > 1}
                         for (t, s), v in sorted(rows.items())], columns=["task", "seed", "numerics", "mixed"])


def check_seed_numerics(todo: list[RunConfig], configs: Mapping[tuple, RunConfig], out_dir: Path) -> None:
    """Refuse to train a cell whose seed's finished arms used other numerics than this machine would: another
    precision, device kind or kernel family (:meth:`run_numerics.Numerics.mixes_with`; a paired difference
    must not mix bf16 and fp32, nor AMX and AVX512-BF16 products), naming the seed and the numerics."""

    for config in todo:
        planned = numerics_here(config)
        done = {record_numerics_detail(out_dir / c.relative_dir())
                for (task, _, seed), c in configs.items() if task == config.task and seed == config.seed}
        other = sorted({n.kernel_label for n in done if n is not None and n.mixes_with(planned)})
        if other:
            raise ValueError(
                f"seed {config.seed} of {config.task}: its finished arms used {other}, this machine would train "
                f"{config.strategy} in {planned.kernel_label}; a paired difference must not mix numerics (precision, "
                "device or kernel family). Run this seed where its other arms ran (or set precision explicitly "
                "with --set precision=..., which starts a new grid).")


# --------------------------------------------------------------------------------------------------
# Outputs


def write_outputs(study: StudyDesign, configs: Mapping[tuple, RunConfig], out_dir: Path) -> dict[str, pd.DataFrame]:
    """The tables and the figure of the study so far (atomically written); returns the tables."""
    from typhoon.studies.sequential.figure import plot_sequential_looks

    results = results_table(configs, out_dir)
    history, verdicts = analyse(results, study)
    verdicts = with_checks(verdicts, results, study, arm_numerics(configs, out_dir))
    tables = {"verdicts": verdicts, "history": history, "design": design_table(study, studies=5_000),
              "boundaries": sequential.design_boundaries(study.design), "seeds": seed_numerics(configs, out_dir)}
    for name, frame in tables.items():
        atomic.atomic_write_csv(out_dir / "stats" / f"{name}.csv", frame)
    atomic.atomic_write_csv(out_dir / "results.csv", results)
    if len(history):
        plot_sequential_looks(history, out_dir / "figures" / "decisive_looks", looks=study.design.looks)
    return tables


def check_has_records(profile: Profile, out_dir: Path) -> None:
    """FileNotFoundError unless ``out_dir`` holds a finished record of one of ``profile``'s cells (what
    ``decisive-tables`` re-analyses)."""
    if not any(is_complete(out_dir / c.relative_dir(), c) for c in grid_configs(profile).values()):
        raise FileNotFoundError(f"{paths.shown(out_dir)} holds no finished record of profile {profile.name}: "
                                f"run `python -m typhoon reproduce --profile {profile.name} --out {paths.shown(out_dir)}`")


def verdict_counts(verdicts: pd.DataFrame) -> list[str]:
    """One short line per task: how many comparisons reached each verdict, and the next look if any."""
    lines = []
    for task, rows in verdicts.groupby("task", sort=False):
        counts = rows["verdict"].value_counts()
        text = ", ".join(f"{n} {v}" for v, n in counts.items())
        nxt = rows["next_look_seeds"].dropna()
        lines.append(f"{task} (margin ±{rows['margin'].iloc[0]:g}, {int(rows['n_seeds'].max())} seeds): {text}"
                     + (f"; the next look is at {int(nxt.max())} seeds" if len(nxt) else "; answered"))
    return lines


def where_it_stands(results: pd.DataFrame, study: StudyDesign) -> str:
    """Where a study stopped: the looks analysed, what the next look still needs, and the verdicts so far
    (what a stopped ``reproduce`` says, and ``decisive-tables``)."""
    history, verdicts = analyse(results, study)
    done = sorted({int(n) for n in history["n_seeds"]}) if len(history) else []
    plan = plan_next_look(results, study)
    looks = ", ".join(str(n) for n in study.design.looks)
    text = (f"looks done at {', '.join(map(str, done))} seeds (of {looks})" if done
            else f"no look done yet (looks at {looks} seeds)")
    text += (f"; the next look needs {len(plan)} more cell(s), seeds up to {int(plan['seed'].max())}" if len(plan)
             else "; no cell left to train")
    return text + (f"; verdicts so far: {'; '.join(verdict_counts(verdicts))}" if done else "")


def answer(verdicts: pd.DataFrame) -> list[str]:
    """One sentence per task that answers the paper's question (does the masking strategy matter?)."""
    sentences = []
    for task, rows in verdicts.groupby("task", sort=False):
        parts = [f"{r.comparison} {r.verdict} (n = {int(r.n_seeds)}, {r.difference:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}])"
                 if pd.notna(r.difference) else f"{r.comparison} {r.verdict}" for r in rows.itertuples()]
        settled = rows["verdict"].isin(["equivalent", "different", "undecided at cap"]).all()
        head = "answered" if settled else "not answered yet"
        sentences.append(f"{task} ({head}; margin ±{rows['margin'].iloc[0]:g}): " + "; ".join(parts) + ".")
    return sentences


def read_outputs(out_dir: str | Path) -> dict[str, pd.DataFrame]:
    """The tables :func:`write_outputs` wrote under ``<out_dir>/stats`` (FileNotFoundError naming a missing one)."""
    stats_dir = Path(out_dir) / "stats"
    tables = {}
    for name in ("verdicts", "history", "design", "boundaries", "seeds"):
        path = stats_dir / f"{name}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found: run `python -m typhoon reproduce --profile <profile>` first")
        # the seeds a comparison mixes are a list ("0 1 2"): text even when it is one seed
        tables[name] = pd.read_csv(path, dtype={"mixed_seeds": "string"} if name == "verdicts" else None)
    return tables
