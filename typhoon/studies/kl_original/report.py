"""The kl-original study's answer: the answer in sentences (every number read from the tables) and the study's
README with its tables (``python -m typhoon kl-original table``); the predictions' verdicts are
:mod:`typhoon.studies.kl_original.verdicts`'."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from typhoon.analysis.kl import KL_DEFINITIONS
from typhoon.studies.kl_original.as_measured import (
    measured_addendum,
    measured_sentence,
    measurement_name,
    same_states,
)
from typhoon.studies.kl_original.curve import (
    CURVE_FIGURE,
    END_OF_EPOCH,
    curve_change,
    curve_levels,
    curve_trend,
    read_curves,
    read_traces,
    trace_spread,
)
from typhoon.studies.kl_original.design import (
    ADDENDUM,
    ADDENDUM_AGAINST,
    CURVE_EPOCHS,
    HYPOTHESIS,
    ROWS,
    SECOND_ADDENDUM,
)
from typhoon.studies.kl_original.finetune import (
    ALPHA,
    ALPHA_BONFERRONI,
    CONTROLS,
    SAME_NUMERICS,
    TREATMENT,
    decisive_margins_and_sds,
    finetune_table,
)
from typhoon.studies.kl_original.rows import (
    BASELINE,
    rate_table,
    read_row_states,
    rows_not_yet_run,
    rows_table,
)
from typhoon.studies.kl_original.second_addendum import (
    addendum_predictions,
    second_addendum_section,
    second_addendum_tables,
)
from typhoon.studies.kl_original.verdicts import (
    IDENTICAL_TO,
    factor_text,
    identity_table,
    per_token_rows,
    predictions,
)

#: the 2023 budget in the words every text uses (the README, notebook 30, the report, docs/results.md)
BUDGET_2023 = "rate = p over all ids, specials included"


def spread_sentence(spread: pd.DataFrame) -> str:
    """How far a snapshot's timing moves the KL within an epoch, the highest ratio quoted with its epoch, and
    the highest after the first epoch (where the EMA starts from zeros and the model from its initial state)."""
    top = spread.loc[spread["highest_over_lowest"].idxmax()]
    text = (f"Within an epoch the per-token Bernoulli KL moves with the step a snapshot is taken at: over the "
            f"{len(spread)} (run, epoch) traces the highest snapshot is ×{spread['highest_over_lowest'].min():.2g}–"
            f"×{top.highest_over_lowest:.2g} the lowest (median ×{spread['highest_over_lowest'].median():.2g}); the "
            f"×{top.highest_over_lowest:.2g} is epoch {top.epoch} ({top.task} seed {top.seed})")
    later = spread[spread["epoch"] > 1]
    if not later.empty:
        high = later.loc[later["highest_over_lowest"].idxmax()]
        text += (f", and after epoch 1 the highest is ×{high.highest_over_lowest:.2g} (epoch {high.epoch}, {high.task} "
                 f"seed {high.seed})")
    return text + f"; the highest value anywhere is {spread['highest'].max():.2g} nats/token (`tables/trace_spread.csv`)."


def levels_sentence(levels: pd.DataFrame) -> str:
    """The share of end-of-epoch states and of trace snapshots above 7e-4, and their medians."""
    parts = [f"{r.above_7e_4} of the {r.n:,} {r.kls} ({100 * r.share_above:.2g} %) lie above the paper's 7e-4, "
             f"their median {r.median:.2g} (×{r.median_to_paper:.2g} the paper's)"
             for r in levels.rename(columns={"above_7e-4": "above_7e_4"}).itertuples()]
    return ("Per token, " + "; ".join(parts) + ": the paper's figure is what a few single states and snapshots of "
            "these runs reach, not what they typically show.")


def finetune_sentence(finetune: pd.DataFrame) -> str:
    """Each fine-tuned comparison: its difference, the pairs landed of those registered, TOST and its power;
    where some pairs mix numerics, the verdict without them."""
    parts = []
    for (task, comparison), group in finetune.groupby(["task", "comparison"], sort=False):
        r = group.iloc[0]
        if r.n_pairs < 2:
            parts.append(f"{task} {comparison}: {r.n_pairs} of {r.n_registered} registered pairs, no test yet")
            continue
        verdict = ("equivalent at α 0.05" + (f" and at the Bonferroni α {ALPHA_BONFERRONI:g}" if r.equivalent_bonferroni
                                              else f", not at the Bonferroni α {ALPHA_BONFERRONI:g}")
                   if r.equivalent else "not shown equivalent")
        if r.n_pairs < r.n_registered:  # the design decides at its registered pairs: before them a reading is interim
            verdict = f"an interim reading, not the registered verdict (due at {r.n_registered} pairs): {verdict}"
        text = (f"{task} {comparison}: {r.mean_diff:+.4f} {r.metric} [95 % {r.ci_low:+.4f}, {r.ci_high:+.4f}] on "
                f"{r.n_pairs} of {r.n_registered} registered pairs, TOST p {r.tost_p:.2g} at ±{r.margin:g}: {verdict} "
                f"(power {r.power_at_planning_sd:.2f} at the planning sd {r.planning_sd:g}, "
                f"{r.power_at_observed_sd:.2f} at the observed {r.sd_diff:.2g})")
        without = group[group["pairs"] == SAME_NUMERICS]
        if isinstance(r.mixed_seeds, str) and r.mixed_seeds:
            w = without.iloc[0] if not without.empty else None
            text += (f"; seeds {r.mixed_seeds} mix numerics ({r.mixed_numerics}), without them "
                     + (f"TOST p {w.tost_p:.2g} on {w.n_pairs} pairs" if w is not None and math.isfinite(w.tost_p)
                        else "too few pairs for a test"))
        parts.append(text)
    tested = {f"{TREATMENT} - {c}" for c in CONTROLS} - set(finetune["comparison"])
    parts += [f"{comparison}: not yet run" for comparison in sorted(tested)]
    return "Fine-tuned under the 2023 phase 1: " + "; ".join(parts) + "."


def every_rule_sentence(rows: pd.DataFrame, verdicts: pd.DataFrame | None, same: dict[str, str] | None = None) -> str:
    """The row nearest the 2023 run ('all_plus', every 2023 rule at once) in both per-token units, whether an
    interval holds 7e-4, and prediction 9's verdict; ``same``: the rows that share their states
    (:func:`~typhoon.studies.kl_original.as_measured.same_states`), named together."""
    mine = per_token_rows(rows, "all_plus")
    if mine.empty:
        return ""
    name = measurement_name("all_plus", same or {})
    held = list(mine.loc[mine["reaches_7e-4"] == True, "unit"])  # noqa: E712 (None where untestable)
    verdict = ("" if verdicts is None else
               f" (prediction 9: {verdicts.loc[verdicts['prediction'] == 9, 'verdict'].iloc[0]})")
    return (f"With every 2023 rule at once ('{name}', {mine['n_states'].iloc[0]} states), per token: "
            + "; ".join(f"{r.unit} {r.kl:.2g} [95 % {r.kl_ci_low:.2g}, {r.kl_ci_high:.2g}], ×{r.ratio_to_paper:.2g} "
                        "the paper's" for r in mine.itertuples())
            + (f": the interval of {' and '.join(held)} holds 7e-4, so at one MLM epoch the paper's figure is not "
               "ruled out" if held else ": no interval holds 7e-4") + verdict + ".")


def answer(tables: dict[str, pd.DataFrame]) -> str:
    """The study's answer to 'why is our KL 0.05x the paper's?' in sentences, every number from ``tables``."""
    from typhoon.analysis.kl import max_band_kl

    rows = tables["rows"]
    per_token = rows[rows["unit"] == "bernoulli"].set_index("row")
    t = per_token.loc[per_token["kl"].idxmax()]
    # rows whose states are bit-identical (prediction 8) are one measurement: named once, together
    same = same_states(tables["identity"]) if "identity" in tables else {}
    top = measurement_name(str(t.name), same)
    sentences = ["Per token (the per-token Bernoulli KL, the paper's stated unit), the highest "
                 + (f"row at one MLM epoch is '{top}' ({t.n_states} states)" if " = " not in top else
                    f"measurement at one MLM epoch is '{top}' (one measurement: the same {t.n_states} states bit "
                    "for bit)")
                 + f": {t.kl:.2g} nats/token [95 % {t.kl_ci_low:.2g}, {t.kl_ci_high:.2g}], "
                 f"×{t.ratio_to_paper:.2g} the paper's 7e-4; the baseline is {per_token.loc[BASELINE, 'kl']:.2g}."
                 if BASELINE in per_token.index else ""]
    sentences.append(f"The band allows far more: min-max into [0.6, 1] can reach {max_band_kl(0.3, 0.4):.2g} nats/token "
                     f"at p 0.3 and {max_band_kl(0.15, 0.4):.2g} at 0.15, so it is the saliency's spread over the "
                     "types, not the band's ceiling, that keeps the KL low.")
    rates = tables.get("rates")
    if rates is not None and (rates["row"] == "budget").any():
        b = rates[rates["row"] == "budget"].iloc[0]
        text = (f"The 2023 budget ({BUDGET_2023}; the specials are never masked) puts the realised rate at "
                f"{b.rate_over_p_min:.3f}–{b.rate_over_p_max:.3f} of p alone, where the specials sit at the band's "
                "midpoint")
        if (rates["row"] == "all").any():
            c = rates[rates["row"] == "all"].iloc[0]
            text += (f", and at {c.rate_over_p_min:.3f}–{c.rate_over_p_max:.3f} of p with every 2023 rule at once "
                     "(the specials at the band's top)")
        sentences.append(text + " (prediction 2).")
    reaching = rows[(rows["reaches_7e-4"] == True) | (rows["within_3x"] == True)]  # noqa: E712
    units = sorted(set(reaching["unit"]) - {u for u in reaching["unit"] if u.endswith("_bits")})
    sentences.append("Rows whose 95 % interval contains 7e-4 or lies within 3x of it, by unit (rows that share their "
                     "states named once): "
                     + ("; ".join(f"{u}: {', '.join(_measurements(reaching[reaching['unit'] == u]['row'], same))}"
                                  for u in units) if units else "none")
                     + ". Per sequence is another unit than the paper's 'per token'.")
    if "addendum_measured" in tables:
        sentences.append(measured_sentence(tables["addendum_measured"]))
    sentences.append(every_rule_sentence(rows, tables.get("predictions"), same))
    waiting = [row for row in ADDENDUM_AGAINST if row not in per_token.index]
    if waiting:
        sentences.append(f"Not yet run: {', '.join(repr(row) for row in waiting)}.")
    if "curve" in tables:
        parts = []
        for reading, what in ((END_OF_EPOCH, "read at each epoch's end (registered)"),
                              (None, "read as the geometric mean of each epoch's trace snapshots (supplementary)")):
            chosen = tables["curve"][tables["curve"]["unit"] == "bernoulli"]
            chosen = chosen[chosen["reading"] == reading] if reading else chosen[chosen["reading"] != END_OF_EPOCH]
            if not chosen.empty:
                c = chosen.iloc[0]
                parts.append(f"{what}, the KL at epoch {c.last_common_epoch} is ×{c.change:.2g} [95 % "
                             f"{c.change_ci_low:.2g}, {c.change_ci_high:.2g}] that at epoch 1 over {c.runs:.0f} runs "
                             f"({c.direction})")
        sentences.append(f"Over the long MLM phase, as far as it ran (of {CURVE_EPOCHS['mrpc']} MRPC / "
                         f"{CURVE_EPOCHS['cola']} CoLA epochs): " + "; ".join(parts) + ".")
    if "curve_trend" in tables:
        planned = f"{CURVE_EPOCHS['mrpc']} (MRPC) / {CURVE_EPOCHS['cola']} (CoLA)"
        trend = tables["curve_trend"][tables["curve_trend"]["unit"] == "bernoulli"]
        sentences.append(f"As an extrapolation, not a registered test: a power law fitted to every epoch of each run "
                         f"and carried to the planned {planned} epochs gives, " + "; ".join(
                             f"{r.reading.split(' (')[0]}: slope of log KL on log epoch {r.slope:.2g} [95 % "
                             f"{r.slope_ci_low:.2g}, {r.slope_ci_high:.2g}] ({r.trend}), {r.kl_end:.2g} nats/token "
                             f"[95 % {r.kl_end_ci_low:.2g}, {r.kl_end_ci_high:.2g}] at the end, {r.verdict}"
                             for r in trend.itertuples()) + " (if the power law holds that far).")
    if "curve_levels" in tables:
        sentences.append(levels_sentence(tables["curve_levels"]))
    if "trace_spread" in tables:
        sentences.append(spread_sentence(tables["trace_spread"]))
    if "finetune" in tables and not tables["finetune"].empty:
        sentences.append(finetune_sentence(tables["finetune"]))
    return " ".join(s for s in sentences if s)


def _measurements(rows, same: dict[str, str]) -> list[str]:
    """Each row once as its measurement ('sampler = all_plus'), in the rows' order."""
    return list(dict.fromkeys(measurement_name(same.get(row, row), same) for row in rows))


def _markdown(frame: pd.DataFrame) -> str:
    return frame.to_markdown(index=False, floatfmt=".3g")


def study_tables(out: str | Path, states: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Every table of the study from the states in ``out``, writing nothing (notebook 30 reads them so): the
    rows, rates and prediction 8's identity; the curve read two ways, its trend, levels and spread once a curve
    run has landed; the fine-tuned comparisons once a fine-tuned cell has; the predictions' verdicts."""
    out = Path(out)
    states = read_row_states(out) if states is None else states
    tables = {"rows": rows_table(states), "rates": rate_table(states), "identity": identity_table(out)}
    tables["addendum_measured"] = measured_addendum(states, tables["rows"], tables["identity"])
    curves = None
    try:
        curves = read_curves(out)
        tables["curve"], tables["curve_epochs"] = curve_change(curves), curves
        tables["curve_trend"] = curve_trend(curves)
        tables["trace_spread"] = trace_spread(out)
        tables["curve_levels"] = curve_levels(curves, read_traces(out))
    except FileNotFoundError:
        pass
    tables.update(second_addendum_tables(out, curves))
    try:
        tables["finetune"] = finetune_table(out, *decisive_margins_and_sds())
    except FileNotFoundError:
        pass
    tables["predictions"] = pd.concat([predictions(tables["rows"], tables["rates"], tables.get("curve"),
                                                   tables["identity"]), addendum_predictions(tables)], ignore_index=True)
    return tables


def write_report(out: str | Path) -> dict[str, pd.DataFrame]:
    """Every table of the study in ``out`` as CSV (``tables/``) and its README.md: the predictions' verdicts,
    the per-token and per-sequence KLs of each row, the addendum's rows against the rows they change, the
    realised rates, the curve read two ways (its change, its trend, its levels and spread) and the fine-tuned
    comparisons (each part as far as its states have landed; a row without states is 'not yet run').
    Returns the tables."""
    from typhoon.atomic import atomic_write_csv, atomic_write_text

    out = Path(out)
    states = read_row_states(out)
    tables = study_tables(out, states)
    for name, table in tables.items():
        atomic_write_csv(out / "tables" / f"{name}.csv", table)

    shown = tables["rows"][tables["rows"]["unit"].isin(KL_DEFINITIONS)]
    wide = shown.pivot(index="row", columns="unit", values="kl").reindex([r.name for r in ROWS]).dropna(how="all")
    wide = wide[list(KL_DEFINITIONS)].reset_index()
    counts = states.groupby("row").size()
    waiting = rows_not_yet_run(states)
    sections = [
        "# kl-original: the paper's 2023 calibration rules, measured under every KL definition\n",
        "Written by `python -m typhoon kl-original table` from the states in this folder "
        "(`typhoon/studies/kl_original/`: `rows.py`, `curve.py`, `finetune.py`, `verdicts.py`, `as_measured.py`, "
        "`second_addendum.py`, `report.py`); design: `design.py`; runs: `policy.py`. States per row: "
        + ", ".join(f"{row} {counts.get(row, 0)}" for row in [r.name for r in ROWS]) + ".\n",
        "## Registered hypothesis\n", HYPOTHESIS + "\n", ADDENDUM + "\n", SECOND_ADDENDUM + "\n",
        "## The answer\n", answer(tables) + "\n",
        "## The predictions\n", _markdown(tables["predictions"]) + "\n",
        "A change 'raises' or 'lowers' the KL when its 95 % interval excludes ×1, 'leaves' it when the interval "
        "holds ×1 and lies within ×0.5–×2, and is 'not detected' when the interval holds ×1 and reaches past "
        "×0.5 or ×2 (most often both): then no change is seen and none is ruled out.\n",
        "## Each row's KL under each definition (geometric mean over its states; nats per the unit of "
        "`typhoon/analysis/kl/units.py`)\n",
        "Only `bernoulli` and `bernoulli_vs_budget` are per token, the paper's stated unit; "
        "`masked_distribution` is per masked token, the `_per_sequence` ones per sequence.\n",
        _markdown(wide) + "\n",
        (f"Not yet run: {', '.join(waiting)}.\n" if waiting else ""),
        "Intervals, the paired change against the baseline (unadjusted and Bonferroni over each row's family: the 7 "
        "first rows, the addendum's 4), against the row an addendum row changes (`against_*`), and the criteria "
        "for every unit, bits included: `tables/rows.csv`.\n",
    ]
    sections += _addendum_section(tables, waiting)
    sections += [
        "## The calibrated rates: realised rate against p and the spread of the per-type rates\n",
        _markdown(tables["rates"]) + "\n",
        f"The 2023 budget (the 'budget' row and every row built on it): {BUDGET_2023}, beta = p N / sum b c over "
        "every input id; the specials are never masked, so the realised rate moves off p. "
        "`pi_min`, `pi_max`: the lowest and highest per-type rate over the row's states (the types that occur); "
        "`pi_sd_mean`: the frequency-weighted sd of the rates, averaged over the states; `mean_band_value`: the "
        "token-weighted mean of the maskable types' calibrated value, the top type at 1 (`tables/rates.csv`).\n",
    ]
    if "curve" in tables:
        sections += _curve_section(tables)
    sections += second_addendum_section(tables)
    if "finetune" in tables:
        sections += ["## Fine-tuned: typhoon_2023 minus random and minus random_2023 under the 2023 phase 1\n",
                     _markdown(tables["finetune"]) + "\n",
                     f"`n_registered`: the seeds the addendum registered per task (the fewest pairs with power ≥ 0.8 "
                     "at the planning sd); the table lists the pairs landed so far (a single pair has no interval "
                     f"and no test). TOST at the decisive design's margins, α {ALPHA:g} per comparison (`equivalent`, "
                     f"unadjusted) and at the Bonferroni α {ALPHA_BONFERRONI:g} over the 4 comparisons "
                     "(`equivalent_bonferroni`); power: the probability that TOST at α 0.05 declares equivalence with "
                     "these pairs when the true difference is 0, at the decisive-mlm design's planning sd of "
                     "typhoon − random and at the observed sd (`tost_power`). A pair whose two arms ran in different "
                     "numerics (precision, device or kernel family) is listed in `mixed_seeds`, and the comparison "
                     "given again without such pairs (`pairs`: 'without mixed numerics').\n"]
    atomic_write_text(out / "README.md", "\n".join(section for section in sections if section))
    return tables


def _addendum_section(tables: dict[str, pd.DataFrame], waiting: list[str]) -> list[str]:
    """The addendum's rows: per-token Bernoulli change against the baseline and against the row each changes,
    and prediction 8's bit-identity of the states."""
    rows = tables["rows"]
    mine = rows[rows["row"].isin(list(ADDENDUM_AGAINST)) & (rows["unit"] == "bernoulli")]
    lines = ["## The addendum's rows: against the baseline and against the row each changes\n"]
    if mine.empty:
        return lines + [f"Not yet run: {', '.join(ADDENDUM_AGAINST)}.\n"]
    shown = pd.DataFrame([{
        "row": r.row, "against": r.against, "n_states": r.n_states, "kl": r.kl,
        "vs baseline": factor_text(r, bonferroni=True) if pd.notna(r.change) else "fewer than two pairs yet",
        "vs baseline (Bonferroni)": r.direction_bonferroni if pd.notna(r.change) else "",
        "vs against": (factor_text(r, "against_", bonferroni=True) if pd.notna(r.against_change)
                       else "fewer than two pairs yet"),
        "vs against (Bonferroni)": r.against_direction_bonferroni if pd.notna(r.against_change) else ""}
        for r in (s for _, s in mine.iterrows())])
    measured = tables.get("addendum_measured")
    if measured is not None and not measured.empty:
        testable = measured[measured["testable"]]
        lines += ["### As the states show them\n",
                  _markdown(measured.drop(columns=["rows"]).astype(object).where(measured.notna(), "")) + "\n",
                  "One line per comparison the states can make (`tables/addendum_measured.csv`): rows whose states are "
                  "bit for bit the same (prediction 8) are one measurement, named together; a row whose states are "
                  "those of the row it is compared with cannot differ from it, so its line is untestable (`why`) and "
                  f"leaves the family; Bonferroni over the {len(testable)} testable comparisons (`family`). "
                  "`registered`: the same line as registered, Bonferroni over the addendum's 4 (the table below).\n",
                  "### As registered\n"]
    lines += ["Per-token Bernoulli KL (nats/token); each change is the geometric mean ratio over the paired (task, "
              "seed) states, 95 % t interval unadjusted and Bonferroni over the addendum's 4 rows, as registered.\n",
              _markdown(shown) + "\n"]
    identity = tables["identity"]
    if not identity.empty:
        summary = identity.groupby(["row", "reference"])["identical"].agg(["sum", "size"]).reset_index()
        lines.append("Prediction 8, the states bit for bit (every array of `masking_state.npz`): " + "; ".join(
            f"'{r.row}' {int(r['sum'])} of {int(r['size'])} identical to '{r.reference}'"
            for _, r in summary.iterrows()) + " (`tables/identity.csv`).\n")
    left = [row for row in waiting if row in ADDENDUM_AGAINST or row in IDENTICAL_TO.values()]
    if left:
        lines.append(f"Not yet run: {', '.join(left)}.\n")
    return lines


def _curve_section(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The curve read two ways, side by side: its change, its figure, its levels against 7e-4, its trend."""
    curve, trend = tables["curve"], tables["curve_trend"]
    lines = ["## The curve ('all' row, the 2023 code's long MLM phase), read two ways\n",
             "Each epoch is read at its end (the masking state then, registered: prediction 5) and, supplementary, "
             "as the geometric mean of its trace snapshots (every 10 steps): the EMA puts 0.8 on the last batch's "
             "saliency, so an end-of-epoch state is close to one snapshot.\n",
             _markdown(curve[curve["unit"].isin(KL_DEFINITIONS)]) + "\n",
             f"![KL against MLM epochs, per seed: each epoch's end and its trace mean, with the power laws]"
             f"({CURVE_FIGURE}.png)\n",
             "Every epoch of every run, both readings (`trace_mean_*`): `tables/curve_epochs.csv`.\n"]
    if "curve_levels" in tables:
        lines += ["### Where the KLs lie against 7e-4\n", _markdown(tables["curve_levels"]) + "\n",
                  levels_sentence(tables["curve_levels"]) + " (`tables/curve_levels.csv`)\n"]
    lines += ["### The trend over every epoch, extrapolated to the planned end (not registered)\n",
              _markdown(trend[trend["unit"].isin(KL_DEFINITIONS)]) + "\n",
              "A supplementary reading, not a registered test (prediction 5 is the table above): per run and reading, "
              "the least-squares line of log KL on log epoch over every epoch it reached; `slope` is its "
              "mean over the runs with the 95 % t interval (`trend`: rises, falls or not detected), `kl_end` the "
              "geometric mean of the KLs those lines give at the planned end (100 epochs MRPC, 80 CoLA) "
              "with the 95 % t interval of their logs, and its `verdict` against 7e-4. It assumes that the "
              "power law holds to the planned end, which these noisy epochs cannot show (`tables/curve_trend.csv`).\n"]
    if "trace_spread" in tables:
        lines.append(spread_sentence(tables["trace_spread"]) + "\n")
    return lines
