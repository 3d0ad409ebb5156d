"""What a reader of the repository's Markdown sees of the committed runs, generated from their tables and
written between markers (``python -m typhoon results-readme``) or checked against them:

- the results page (:data:`RESULTS_PAGE`, ``docs/results.md``): one block per study folder — the reference
  run's headline and the paper's claims, the decisive study's verdicts, the schedules grid's comparisons;
- the README's answer table (:func:`answer_markdown`): each decisive study's verdicts side by side, one
  column per backbone, so the first table a reader meets says which model each answer came from."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from typhoon import atomic, machine, paths
from typhoon.analysis import (
    NULL_POWER_DZ,
    POWER_TARGET,
    Tables,
    decisive,
    headline_table,
    holm_caption,
    markdown_table,
    read_tables,
    schedule_study,
)
from typhoon.analysis.paper_claims import claims_table, headline
from typhoon.profiles import get_profile
from typhoon.records import read_json, read_manifest, results_numerics, trained_at_line

RESULTS_PAGE = Path("docs") / "results.md"  # under the repository root: where the study blocks live

README_BEGIN = "<!-- results:begin -->"


README_END = "<!-- results:end -->"


def own_markers(out_dir: str | os.PathLike, kind: str = "results") -> tuple[str, str]:
    """The markers of a study's own block, ``<!-- <kind>:<folder>:begin -->`` ... ``:end -->`` (kind
    ``results`` for a reference run, ``decisive`` for a sequential study): two studies of one kind
    (``results/cpu`` and ``results/cpu-mlm``; ``results/decisive`` and ``results/decisive-mlm``) each get a
    block. A page without them keeps the kind's one block (:data:`README_BEGIN`, :data:`DECISIVE_BEGIN`)."""
    name = Path(out_dir).resolve().name
    return f"<!-- {kind}:{name}:begin -->", f"<!-- {kind}:{name}:end -->"


# The decisive study's block leads the Results section: the answer so far, from its sequential tables.
DECISIVE_BEGIN = "<!-- decisive:begin -->"


DECISIVE_END = "<!-- decisive:end -->"


# Under the verdict table, in the README block and in the report.
VERDICT_CAPTION = ("Differences are first − second arm, paired by seed. “Different” needs the repeated CI to exclude 0, "
                   "“equivalent” the TOST interval inside ±margin; both are wide at early looks, where the error "
                   "spending leaves little to spend (familywise 5 % over the comparisons and the looks).")


# Under the claims table, in the README block and in the report.
CLAIMS_CAPTION = ("Each claim is judged on the runs it is about, by its criterion (stated before the data): reproduced "
                  "when the 95 % interval lies inside the criterion, contradicted when it lies outside, not decided when "
                  "it straddles. A claim that no test is significant, where none is, is only “consistent at low power” "
                  f"when a paired t-test at these seeds had a power below {POWER_TARGET:g} against a medium "
                  f"effect (dz {NULL_POWER_DZ:g}, α 0.05): such an outcome was likely whatever the truth.")


# The schedules grid's block (issue: does full-mask mass in the MLM phase change the fine-tuned model?).
SCHEDULES_BEGIN = "<!-- schedules:begin -->"


SCHEDULES_END = "<!-- schedules:end -->"


# Under the schedules table, in the README block and in the report.
SCHEDULE_CAPTION = ("Each schedule minus the same strategy under fixed 15 % masking, paired by seed. The dev metric is "
                    "“equivalent” when TOST at the registered margin gives p < 0.05, “different” when the paired t "
                    "(Holm over the table) does and TOST does not, else inconclusive; the seeds column is what 80 % "
                    "power at the margin would need from the measured spread. The full-mask loss is the masked LM's "
                    "dev loss with every maskable token masked, at the end of the MLM phase; the theory predicts it "
                    "lower under both schedules, and “agrees” needs its paired t p, Holm-adjusted over the table like the "
                    "dev metric, below 0.05 with the difference below 0; the last column is the verdict an unadjusted "
                    "95 % interval would give, shown for comparison only.")


# The README's first table: the decisive studies' verdicts, one column per backbone (python -m typhoon
# results-readme --answer). Listed in the order a reader should weigh them: the study on the backbone that
# models language first, the fresh-head one kept beside it, labelled.
ANSWER_BEGIN = "<!-- answer:begin -->"


ANSWER_END = "<!-- answer:end -->"


ANSWER_STUDIES = ("decisive-mlm", "decisive")  # profiles; each one's committed folder is results/<profile>


def _shown(out_dir: str | os.PathLike, link: str) -> str:
    """A results folder as a reader types it: relative to the repository root; outside the repository,
    as ``link`` reaches it from the page."""
    folder, root = Path(out_dir).resolve(), paths.repo_root().resolve()
    return folder.relative_to(root).as_posix() if folder.is_relative_to(root) else link


def results_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's Results block for the reference run in ``out_dir``; links are relative to
    ``link_base`` (the folder of the README, default the repository)."""
    tables = read_tables(out_dir)
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(tables.out_dir, base)).as_posix()  # links: from the page's folder
    shown = _shown(tables.out_dir, rel)  # names: from the repository root, as a reader types them
    manifest = read_manifest(tables.out_dir) or {}
    lines = [f"Reference run of the `{tables.profile}` profile (`{shown}/`): "
             + _provenance_line(manifest, tables) + ".", "", f"**{headline(tables)}**", ""]
    mix = results_numerics(tables.results) if "precision" in tables.results else {}
    if len(mix) > 1:
        lines += [f"**Mixed numerics**: {', '.join(f'{k} ({v} runs)' for k, v in sorted(mix.items()))}.", ""]
    lines += [markdown_table(headline_table(tables)), "",
              f"Paired differences are {tables.reference} minus the strategy, by seed; TOST tests equivalence "
              f"within the margin; {holm_caption(tables)} (this table's family).", ""]
    figure = tables.out_dir / "figures" / "paired_differences.png"
    if figure.is_file():
        lines += [f"![Paired differences with 95 % CIs and the equivalence margin]({rel}/figures/paired_differences.png)",
                  ""]
    lines += ["**The paper's claims, checked against this run's tables** (`typhoon.analysis.paper_claims.claims_table`):", "",
              CLAIMS_CAPTION, "",
              markdown_table(claims_table(tables)), "",
              f"The full report: [`{shown}/report.html`]({rel}/report.html); the executed notebooks: "
              f"[`{shown}/notebooks/`]({rel}/notebooks/); the tables: [`{shown}/stats/`]({rel}/stats/)."]
    return "\n".join(lines)


def _interval(low: float, high: float) -> str:
    # an early look's repeated CI spans hundreds of F1 points: its digits past the unit say nothing
    digits = 4 if max(abs(low), abs(high)) < 10 else 0
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def _looks(looks: str) -> str:
    """'3 6 10 13 16' (design.csv) as '3, 6, 10, 13 and 16'."""
    counts = str(looks).split()
    return counts[0] if len(counts) == 1 else ", ".join(counts[:-1]) + " and " + counts[-1]


def seed_span(ids) -> str:
    """'seed 3', 'seeds 0–2' or 'seeds 0, 4, 7'."""
    ids = sorted(int(s) for s in ids)
    return f"seed {ids[0]}" if len(ids) == 1 else (f"seeds {ids[0]}–{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1))
                                                   else "seeds " + ", ".join(map(str, ids)))


def seed_numerics_line(seeds: pd.DataFrame) -> str:
    """'cola seeds 0-2: ...; mrpc seed 3: ...': which numerics each task's seeds used (stats/seeds.csv)."""
    return "; ".join(f"{task} {seed_span(rows['seed'])}: {numerics}"
                     for (task, numerics), rows in seeds.groupby(["task", "numerics"], sort=False))


def probability(p: float) -> str:
    """A simulated probability as it can be read: 2 decimals, 3 above 0.99, '> 0.999' past that."""
    return "—" if pd.isna(p) else "> 0.999" if p > 0.999 else f"{p:.3f}" if p > 0.99 else f"{p:.2f}"


def _mixed(value) -> str:
    """verdicts.csv's ``mixed_seeds`` ('0 1 2', blank when none) as 'seeds 0–2' ('' when none)."""
    return "" if pd.isna(value) or not str(value).strip() else seed_span(str(value).split())


def _named(rows: pd.DataFrame, power: str, sd: str) -> str:
    """Comparisons named with a probability and the sd it was simulated at: 'cola a - b 0.49 (sd 0.0280); ...'."""
    return "; ".join(f"{task} {comparison} {probability(p)} (sd {s:.4f})"
                     for task, comparison, p, s in zip(rows["task"], rows["comparison"], rows[power], rows[sd], strict=True))


def power_sentence(verdicts: pd.DataFrame, design: pd.DataFrame) -> str:
    """How likely the design was to decide each comparison, at the planning sds (stats/design.csv) and at the
    sds measured on each comparison's seeds (stats/verdicts.csv ``power_at_cap`` at ``power_sd``).

    A design planned with one sd per task is stated per task; one planned per comparison (the sds another
    study measured) names the comparisons its simulation puts below the target. While comparisons continue,
    the measured sds come from few seeds, and the sentence says how few."""
    target = float(design["power"].iloc[0]) if "power" in design else 0.8
    # a design.csv written before p_decided_at_0 existed gives the planning sds only
    design = design.assign(p_decided_at_0=design.get("p_decided_at_0", float("nan")))
    head = ("Power, the probability that the design decides a comparison (equivalent or different) by its cap when "
            "the true difference is 0, simulated: ")
    if design.groupby("task")["planning_sd"].nunique().max() > 1:
        short = design[design["p_decided_at_0"] < target]
        head += (f"at the planning sds, one per comparison (`stats/design.csv`), {len(design) - len(short)} of "
                 f"{len(design)} comparisons reach the ≥ {target:g} the cap was chosen for"
                 + (f" ({_named(short, 'p_decided_at_0', 'planning_sd')})" if len(short) else ""))
    else:
        plan = design.drop_duplicates("task")
        at_plan = ", ".join(f"{task} {probability(p)} (sd {sd:.4f})"
                            for task, p, sd in zip(plan["task"], plan["p_decided_at_0"], plan["planning_sd"], strict=True))
        head += f"at the planning sds (3 seeds; `stats/design.csv`) {at_plan}, the ≥ {target:g} the cap was chosen for"
    if "power_at_cap" not in verdicts:
        return head + "."
    measured = verdicts.dropna(subset=["power_at_cap"])
    below = measured[measured["power_at_cap"] < target]
    so_far = ""
    if (verdicts["verdict"] == "continue").any() and "power_sd_seeds" in measured and len(measured):
        counts = measured["power_sd_seeds"].astype(int)
        span = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()}–{counts.max()}"
        so_far = f"; {span} seeds so far, a rough estimate"
    return (head + "; at the sd of the paired differences measured on each comparison's seeds (`power_at_cap` "
            f"at `power_sd` in `stats/verdicts.csv`{so_far}) {len(below)} of {len(measured)} comparisons fall below {target:g}"
            + (f": {_named(below, 'power_at_cap', 'power_sd')}" if len(below) else "") + ".")


# the verdict without the mixed seeds, in words where the bare verdict would mislead
WITHOUT = {"continue": "not decided (the design would continue with more seeds)"}


def mixed_sentence(verdicts: pd.DataFrame) -> str | None:
    """The comparisons whose pairs mix kernel families (stats/verdicts.csv ``mixed_seeds``), and the verdict
    the design gives without those seeds; None when no pair mixes."""
    if "mixed_seeds" not in verdicts:
        return None
    rows = verdicts[[bool(_mixed(v)) for v in verdicts["mixed_seeds"]]]
    if rows.empty:
        return None
    parts = [f"{r.task} {r.comparison} at {_mixed(r.mixed_seeds)} ({r.mixed_kernels}): without them "
             f"{WITHOUT.get(r.verdict_without_mixed, r.verdict_without_mixed)}, TOST "
             f"{_interval(r.tost_low_without_mixed, r.tost_high_without_mixed)} on the {int(r.n_seeds_without_mixed)} "
             "seeds left" for r in rows.itertuples()]
    return ("Pairs that mix kernel families (`mixed_seeds` in `stats/verdicts.csv`): " + "; ".join(parts)
            + ". Without them the seeds left are judged by the design's boundaries at their count; where the "
              "records reach the cap they are all the comparison has, and their last look spends what is left "
              "of the error.")


def verdict_display_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The sequential study's ``stats/verdicts.csv`` for a reader: one row per comparison with its seeds,
    difference, both intervals (rounded to what they can say), margin and verdict; where the table has them,
    the power at the cap at the sd measured on the comparison's seeds, the seeds whose pairs mix kernel
    families and the verdict without them."""
    return pd.DataFrame({
        "task": verdicts["task"], "metric": verdicts["metric"], "comparison": verdicts["comparison"],
        "seeds": verdicts["n_seeds"].astype(int), "difference": verdicts["difference"].map(lambda v: f"{v:+.4f}"),
        "repeated CI (different)": [_interval(lo, hi) for lo, hi in zip(verdicts["ci_low"], verdicts["ci_high"], strict=True)],
        "TOST interval": [_interval(lo, hi) for lo, hi in zip(verdicts["tost_low"], verdicts["tost_high"], strict=True)],
        "margin": verdicts["margin"].map(lambda v: f"±{v:g}"), "verdict": verdicts["verdict"],
        **({} if "power_at_cap" not in verdicts else {
            "power at cap (measured sd)": verdicts["power_at_cap"].map(probability),
            "mixed kernels": verdicts["mixed_seeds"].map(_mixed),
            "verdict without them": [v if _mixed(m) else "" for m, v in
                                     zip(verdicts["mixed_seeds"], verdicts["verdict_without_mixed"], strict=True)]})})


def decisive_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's block for a sequential study (``reproduce --profile decisive``): one line per task
    (:func:`typhoon.analysis.decisive.verdict_counts`), the verdict table, the numerics of each seed, the figure."""
    out_dir = Path(out_dir)
    tables = decisive.read_outputs(out_dir)
    verdicts, seeds = tables["verdicts"], tables["seeds"]
    results = pd.read_csv(out_dir / "results.csv")
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(out_dir.resolve(), base)).as_posix()  # links: from the page's folder
    shown = _shown(out_dir, rel)  # names: from the repository root, as a reader types them
    looks = tables["design"]["looks"].iloc[0]
    open_ = verdicts[verdicts["verdict"] == "continue"]
    state = ("every comparison is decided or at its cap" if open_.empty else
             f"{len(open_)} of {len(verdicts)} comparisons continue; the next look needs "
             + ", ".join(f"{t} {int(n)} seeds" for t, n in open_.groupby("task", sort=False)["next_look_seeds"].max().items()))
    executed = out_dir / "notebooks" / decisive.NOTEBOOK
    notebook = Path(os.path.relpath(executed.resolve() if executed.is_file() else paths.repo_root() / "notebooks" / decisive.NOTEBOOK,
                                    base)).as_posix()
    title = "A decisive answer" if open_.empty else "The decisive study so far"
    lines = [f"**{title}** (`{shown}/`, [notebook 50]({notebook})): {len(results)} records; "
             f"looks at {_looks(looks)} seeds (the last is the cap); {state}.", ""]
    lines += [f"- {line}." for line in decisive.verdict_counts(verdicts)]
    table = verdict_display_table(verdicts)
    lines += ["", markdown_table(table), "",
              VERDICT_CAPTION, "", power_sentence(verdicts, tables["design"]), ""]
    mixed = mixed_sentence(verdicts)
    lines += [mixed, ""] if mixed else []
    lines += [f"Numerics by seed (`{shown}/stats/seeds.csv`): {seed_numerics_line(seeds)}.", ""]
    figure = out_dir / "figures" / "decisive_looks.png"
    if figure.is_file():
        lines.append(f"![Each comparison's intervals at every look against its margin]({rel}/figures/decisive_looks.png)")
    return "\n".join(lines).rstrip()


def schedules_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's block for a schedules grid (``reproduce --profile schedules``): the answer
    (:func:`typhoon.analysis.schedule_study.headline`), the comparison table, the provenance line, the figure."""
    out_dir = Path(out_dir)
    table = schedule_study.read_table(out_dir)
    tables = read_tables(out_dir)
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(out_dir.resolve(), base)).as_posix()  # links: from the page's folder
    shown = _shown(out_dir, rel)  # names: from the repository root, as a reader types them
    manifest = read_manifest(out_dir) or {}
    lines = [f"**Mask schedules, downstream** (`{shown}/`, notebook 40 section (d), [report]({rel}/report.html)): "
             + _provenance_line(manifest, tables) + ".", "", f"**{schedule_study.headline(table)}**", "",
             markdown_table(schedule_study.display_table(table)), "", SCHEDULE_CAPTION]
    figure = out_dir / "figures" / "schedules_vs_fixed.png"
    if figure.is_file():
        lines += ["", f"![Each schedule against fixed: dev metric and full-mask MLM loss]({rel}/figures/schedules_vs_fixed.png)"]
    return "\n".join(lines)


def _provenance_line(manifest: dict, tables: Tables) -> str:
    parts = [trained_at_line(tables.out_dir, manifest)]
    if manifest.get("finished"):
        parts.append(manifest["finished"][:10])
    trained = [m["machine"] for m in [*manifest.get("history", []), manifest]
               if m.get("machine") and (m.get("cells") or {}).get("ok")]
    made = manifest.get("machine")
    for line in dict.fromkeys(machine.machine_line(m) for m in trained):
        parts.append(f"trained on {line}")
    if not trained:  # every record reused from another study: the CPUs the records themselves name
        parts += [f"records trained on {line}" for line in _record_cpus(tables)]
    if made and (not trained or machine.machine_line(made) != machine.machine_line(trained[-1])):
        parts.append(f"tables made on {machine.machine_line(made)}")
    if manifest.get("runs_wall_s"):
        parts.append(f"{len(tables.results)} runs, {manifest['runs_wall_s'] / 60:.0f} min of training")
    return "; ".join(parts) or "no MANIFEST.json"


def _record_cpus(tables: Tables) -> list[str]:
    """Each CPU the folder's records were trained on, as ``metrics.json`` ``hardware.cpu`` names it (model and
    the flags that decide the precision), for a folder whose own runs trained none of them."""
    lines = {}
    for path in tables.results.get("record_path", pd.Series(dtype=str)).dropna():
        metrics = read_json(tables.out_dir / path / "metrics.json") or {}
        cpu = (metrics.get("hardware") or {}).get("cpu") or {}
        if cpu.get("model"):
            flags = [flag for flag in machine.CPU_FLAGS if cpu.get(flag)]
            lines[f"{cpu['model']} ({', '.join(flags)})" if flags else cpu["model"]] = None
    return list(lines)


def _markers(out_dir: str | os.PathLike, page: Path, pages) -> tuple[str, str, Callable[..., str]]:
    """The markers of the folder's block on ``page`` (its own where the page has them) and the function that
    writes it, as the study's ``pages`` say (a :class:`typhoon.report.study_pages.StudyPages`)."""
    if pages.own_kind is not None:
        begin, end = own_markers(out_dir, pages.own_kind)
        if page.is_file() and begin in page.read_text(encoding="utf-8"):
            return begin, end, pages.markdown
    return *pages.markers, pages.markdown


MIXED_MARK = "†"  # an answer-table verdict that rests on seeds whose arms ran on different kernel families


def mixed_dependent(verdicts: pd.DataFrame) -> pd.DataFrame:
    """The comparisons whose verdict rests on their mixed-numerics seeds (stats/verdicts.csv ``mixed_seeds``):
    without those seeds the design gives another verdict (``verdict_without_mixed``)."""
    if "verdict_without_mixed" not in verdicts:
        return verdicts.iloc[:0]
    mixed = verdicts["mixed_seeds"].map(lambda v: bool(_mixed(v))).astype(bool)
    return verdicts[mixed & (verdicts["verdict_without_mixed"].astype(str) != verdicts["verdict"])]


def _study_column(profile: str, verdicts: pd.DataFrame | None, n_records: int) -> tuple[str, dict, list[str]]:
    """The answer table's column for one decisive study: its header (backbone, seeds), per (task,
    comparison) the verdict with the difference (marked :data:`MIXED_MARK` where it rests on mixed-numerics
    seeds), and the notes that say what such a verdict is without them."""
    backbone = ", ".join(get_profile(profile).backbones)
    if verdicts is None:
        return f"{backbone} ({n_records} record{'' if n_records == 1 else 's'}, no look yet)", {}, []
    seeds = f"{verdicts['n_seeds'].min()}–{verdicts['n_seeds'].max()}" if verdicts["n_seeds"].nunique() > 1 else \
        str(verdicts["n_seeds"].iloc[0])
    marked = mixed_dependent(verdicts)
    cells = {(row.task, row.comparison): f"{row.verdict} ({row.difference:+.4f})"
             + (MIXED_MARK if row.Index in marked.index else "") for row in verdicts.itertuples()}
    notes = [f"{MIXED_MARK} {backbone}, {r.task} {r.comparison}: {r.verdict} only with its {_mixed(r.mixed_seeds)}, "
             f"whose arms ran on different kernel families ({r.mixed_kernels}); without those mixed-numerics seeds "
             f"the verdict is “{r.verdict_without_mixed}”"
             + (" (not decided: the design would add seeds)" if r.verdict_without_mixed == "continue" else "")
             + f", TOST {_interval(r.tost_low_without_mixed, r.tost_high_without_mixed)} on the "
             f"{int(r.n_seeds_without_mixed)} seeds left." for r in marked.itertuples()]
    return f"{backbone} ({seeds} seeds)", cells, notes


def answer_markdown(studies: tuple[str, ...] = ANSWER_STUDIES, root: Path | None = None) -> str:
    """The README's answer: every comparison of the decisive design, the verdict (and paired difference,
    first − second arm) each study reached, one column per study's backbone. A study without a look yet
    says how many records it has; its column is empty. A verdict that rests on mixed-numerics seeds is
    marked, and a note under the table gives the verdict without them."""
    root = Path(root) if root else paths.repo_root()
    columns, order, margins = [], [], {}
    for profile in studies:
        folder, spec = root / "results" / profile, get_profile(profile)
        design = spec.design
        margins.update(design["margin"])
        order += [(task, " - ".join(pair)) for task in spec.tasks for pair in design["comparisons"]
                  if (task, " - ".join(pair)) not in order]
        verdicts_csv = folder / "stats" / "verdicts.csv"
        n_records = len(list(folder.glob("runs/*/*/*/seed*/metrics.json")))  # records land before a look's tables
        columns.append(_study_column(profile, pd.read_csv(verdicts_csv) if verdicts_csv.is_file() else None,
                                     n_records))
    table = pd.DataFrame({"task": [t for t, _ in order], "comparison": [c for _, c in order],
                          "margin": [f"±{margins[t]:g}" for t, _ in order],
                          **{header: [cells.get(key, "") for key in order] for header, cells, _ in columns}})
    notes = [note for _, _, column_notes in columns for note in column_notes]
    return "\n\n".join([markdown_table(table), *notes])


def update_answer(readme: str | os.PathLike | None = None, check: bool = False,
                  studies: tuple[str, ...] = ANSWER_STUDIES) -> bool:
    """Rewrite the README's answer table (between :data:`ANSWER_BEGIN` and :data:`ANSWER_END`) from the
    decisive studies' committed tables; returns whether it changed (``check``: do not write)."""
    readme = Path(readme) if readme else paths.repo_root() / "README.md"
    root = readme.parent if readme.parent != paths.repo_root() else None
    return _rewrite_block(readme, ANSWER_BEGIN, ANSWER_END, f"{ANSWER_BEGIN}\n{answer_markdown(studies, root)}\n{ANSWER_END}",
                          check, "the decisive studies")


def _rewrite_block(page: Path, begin: str, end: str, block: str, check: bool, what: str) -> bool:
    text = page.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{paths.shown(page)} has no block for {what}: add the lines {begin} and {end}")
    new = pattern.sub(lambda _: block, text, count=1)
    if new != text and not check:
        atomic.atomic_write_text(page, new)
    return new != text


def readme_block(out_dir: str | os.PathLike, readme: Path, pages) -> str:
    """The marked block as it belongs in ``readme`` (markers included), as the study's ``pages`` say: the
    decisive block of a sequential study, the schedules block of a schedules grid, the Results block of a
    reference run."""
    begin, end, markdown = _markers(out_dir, readme, pages)
    return f"{begin}\n{markdown(out_dir, readme.parent)}\n{end}"


def update_readme(out_dir: str | os.PathLike, readme: str | os.PathLike | None = None, check: bool = False, *,
                  pages) -> bool:
    """Rewrite the block of ``out_dir`` in ``readme`` (default: the results page :data:`RESULTS_PAGE`) from its
    tables, between the markers its study's ``pages`` name (:mod:`typhoon.report.study_pages`: the folder's own
    where the page has them); returns whether it changed (``check``: do not write)."""
    readme = Path(readme) if readme else paths.repo_root() / RESULTS_PAGE
    begin, end, _ = _markers(out_dir, readme, pages)
    return _rewrite_block(readme, begin, end, readme_block(out_dir, readme, pages), check, paths.shown(Path(out_dir)))


def readme_block_in(readme: Path, begin: str = README_BEGIN, end: str = README_END) -> str | None:
    """The block between ``begin`` and ``end`` currently in ``readme`` (markers included), None if it has none."""
    match = re.search(re.escape(begin) + r".*?" + re.escape(end), readme.read_text(encoding="utf-8"), re.S)
    return match.group(0) if match else None
