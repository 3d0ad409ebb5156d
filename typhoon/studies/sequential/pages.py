"""The sequential study's pages (:class:`typhoon.report.StudyPages`): a pre-registered sequential design's
verdicts, its power, the pairs that mix kernel families and the numerics of each seed, as its report's Summary and
its own block of the results page per folder."""

from __future__ import annotations

import html
import os
from pathlib import Path

import pandas as pd

from typhoon import paths
from typhoon.analysis import markdown_table
from typhoon.report import StudyPages, frame_html, markdown_html, runs_section_html, shown_folder
from typhoon.studies.sequential import decisive

# The decisive study's block leads the Results section: the answer so far, from its sequential tables.
DECISIVE_BEGIN = "<!-- decisive:begin -->"


DECISIVE_END = "<!-- decisive:end -->"


# Under the verdict table, in the README block and in the report.
VERDICT_CAPTION = ("Differences are first − second arm, paired by seed. “Different” needs the repeated CI to exclude 0, "
                   "“equivalent” the TOST interval inside ±margin; both are wide at early looks, where the error "
                   "spending leaves little to spend (familywise 5 % over the comparisons and the looks).")


def interval_text(low: float, high: float) -> str:
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


def mixed_seeds_text(value) -> str:
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
    rows = verdicts[[bool(mixed_seeds_text(v)) for v in verdicts["mixed_seeds"]]]
    if rows.empty:
        return None
    parts = [f"{r.task} {r.comparison} at {mixed_seeds_text(r.mixed_seeds)} ({r.mixed_kernels}): without them "
             f"{WITHOUT.get(r.verdict_without_mixed, r.verdict_without_mixed)}, TOST "
             f"{interval_text(r.tost_low_without_mixed, r.tost_high_without_mixed)} on the {int(r.n_seeds_without_mixed)} "
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
        "repeated CI (different)": [interval_text(lo, hi) for lo, hi in zip(verdicts["ci_low"], verdicts["ci_high"], strict=True)],
        "TOST interval": [interval_text(lo, hi) for lo, hi in zip(verdicts["tost_low"], verdicts["tost_high"], strict=True)],
        "margin": verdicts["margin"].map(lambda v: f"±{v:g}"), "verdict": verdicts["verdict"],
        **({} if "power_at_cap" not in verdicts else {
            "power at cap (measured sd)": verdicts["power_at_cap"].map(probability),
            "mixed kernels": verdicts["mixed_seeds"].map(mixed_seeds_text),
            "verdict without them": [v if mixed_seeds_text(m) else "" for m, v in
                                     zip(verdicts["mixed_seeds"], verdicts["verdict_without_mixed"], strict=True)]})})


def decisive_markdown(out_dir: str | os.PathLike, link_base: str | None = None) -> str:
    """The README's block for a sequential study (``reproduce --profile decisive``): one line per task
    (:func:`typhoon.studies.sequential.decisive.verdict_counts`), the verdict table, the numerics of each seed, the figure."""
    out_dir = Path(out_dir)
    tables = decisive.read_outputs(out_dir)
    verdicts, seeds = tables["verdicts"], tables["seeds"]
    results = pd.read_csv(out_dir / "results.csv")
    base = Path(link_base).resolve() if link_base else paths.repo_root()
    rel = Path(os.path.relpath(out_dir.resolve(), base)).as_posix()  # links: from the page's folder
    shown = shown_folder(out_dir, rel)  # names: from the repository root, as a reader types them
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


def sequential_findings_html(out_dir: Path) -> str:
    """A sequential study's summary: one line per task, the verdict table, the numerics by seed, the runs."""
    tables = decisive.read_outputs(out_dir)
    verdicts = tables["verdicts"]
    lines = "".join(f"<li>{html.escape(line)}.</li>" for line in decisive.verdict_counts(verdicts))
    mixed = mixed_sentence(verdicts)
    return "\n".join([
        f'<ul class="headline">{lines}</ul>',
        '<h3 id="claims">Each comparison at its last look</h3>',
        f"<p>{html.escape(VERDICT_CAPTION)} The design is in the notebook below and in <code>stats/design.csv</code>.</p>",
        frame_html(verdict_display_table(verdicts), verdicts=True),
        markdown_html(power_sentence(verdicts, tables["design"])),
        *([markdown_html(mixed)] if mixed else []),
        '<h3 id="headline-table">The numerics of each seed</h3>',
        "<p>The numerics of each seed's arms (<code>stats/seeds.csv</code>; a seed listing two, joined by +, ran "
        "its arms on both, and the verdict table flags the comparisons whose pairs that mixes): "
        f"{html.escape(seed_numerics_line(tables['seeds']))}.</p>",
        runs_section_html(pd.read_csv(out_dir / "results.csv")),
    ])


#: The sequential study's pages: its report's Summary and its own block of the results page per folder.
PAGES = StudyPages(("The verdicts", "Numerics by seed"), sequential_findings_html, (DECISIVE_BEGIN, DECISIVE_END),
                   "decisive", decisive_markdown)
