"""The kl-original study's registered predictions, each judged from the tables: (1)-(5) of the hypothesis and
(6)-(9) of the addendum (:mod:`typhoon.studies.kl_original.design`). A verdict is 'holds', 'fails', 'not
decided' (an interval that neither shows nor rules out what was predicted, or fewer pairs than registered), or
'not yet run' (no state of the row yet): a row with no states is never given a verdict."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from typhoon.studies.kl_original.design import ADDENDUM_AGAINST, SEEDS, TASKS
from typhoon.studies.kl_original.rows import LEAVES_FACTOR, identical_states

#: the registered pairs of each comparison of a row: every task x seed
REGISTERED_PAIRS = len(TASKS) * len(SEEDS)
#: prediction 8: each row's states bit-identical to these rows'
IDENTICAL_TO = {"max_length": "numerics", "all_plus": "sampler"}
PER_TOKEN = ("bernoulli", "bernoulli_vs_budget")
NOT_YET_RUN = "not yet run"


def identity_table(out: str | Path) -> pd.DataFrame:
    """Prediction 8's check, per (row, task, seed) that both rows have: whether the state is bit for bit its
    reference row's (:func:`typhoon.studies.kl_original.rows.identical_states`)."""
    return pd.concat([identical_states(out, row, reference) for row, reference in IDENTICAL_TO.items()],
                     ignore_index=True)


def per_token_rows(rows: pd.DataFrame, row: str) -> pd.DataFrame:
    """``row``'s lines of the rows table in the per-token units (:data:`PER_TOKEN`)."""
    return rows[(rows["row"] == row) & rows["unit"].isin(PER_TOKEN)]


def _row_unit(rows: pd.DataFrame, row: str, unit: str) -> pd.Series | None:
    found = rows[(rows["row"] == row) & (rows["unit"] == unit)]
    return None if found.empty else found.iloc[0]


def factor_text(r: pd.Series, prefix: str = "", bonferroni: bool = False) -> str:
    """'×1.1 [95 % 0.82, 1.5; 6 pairs]': a change and its interval (``prefix`` 'against_' for the addendum's
    comparison with the row it changes; ``bonferroni``: the Bonferroni interval too)."""
    text = (f"×{r[f'{prefix}change']:.2g} [95 % {r[f'{prefix}change_ci_low']:.2g}, "
            f"{r[f'{prefix}change_ci_high']:.2g}")
    if bonferroni:
        text += f"; Bonferroni {r[f'{prefix}change_ci_low_bonferroni']:.2g}, {r[f'{prefix}change_ci_high_bonferroni']:.2g}"
    return text + f"; {r[f'{prefix}n_pairs']:.0f} pairs]"


def within_factor(low: float, high: float) -> str:
    """'holds' when the interval [low, high] of a ratio lies within [x1/2, x2], 'fails' when it lies wholly
    outside, else 'not decided' (predictions 3, 6 and 7: 'moves the KL by less than 2x either way')."""
    if 1 / LEAVES_FACTOR <= low and high <= LEAVES_FACTOR:
        return "holds"
    return "fails" if high < 1 / LEAVES_FACTOR or low > LEAVES_FACTOR else "not decided"


def _combine(*parts: str) -> str:
    return "fails" if "fails" in parts else "holds" if set(parts) == {"holds"} else "not decided"


def predictions(rows: pd.DataFrame, rates: pd.DataFrame, curve: pd.DataFrame | None,
                identity: pd.DataFrame | None = None) -> pd.DataFrame:
    """The nine registered predictions, each with its verdict and the numbers it rests on. ``curve``: the
    curve table (:func:`~typhoon.studies.kl_original.curve.curve_change`; prediction 5 reads its end-of-epoch
    reading); ``identity``: :func:`identity_table` (prediction 8; None: not checked)."""
    out = []

    def add(number: int, claim: str, verdict: str, evidence: str) -> None:
        out.append({"prediction": number, "claim": claim, "verdict": verdict, "evidence": evidence})

    p_tok, p_q = _row_unit(rows, "p", "bernoulli"), _row_unit(rows, "p", "masked_distribution")
    claim = "p 0.3 raises the per-token Bernoulli KL ~2.4x and leaves KL(q||u) unchanged"
    if p_tok is None or pd.isna(p_tok.get("change")):
        add(1, claim, NOT_YET_RUN if p_tok is None else "not decided", "" if p_tok is None else "fewer than two pairs")
    else:
        in_ci = p_tok.change_ci_low <= 2.4 <= p_tok.change_ci_high
        tok = ("holds" if p_tok.direction == "raises" and in_ci else
               "fails" if p_tok.direction in ("raises", "lowers") else "not decided")
        q = {"leaves": "holds", "raises": "fails", "lowers": "fails"}.get(p_q.direction, "not decided")
        add(1, claim, _combine(tok, q), f"Bernoulli {factor_text(p_tok)}: {p_tok.direction}; KL(q||u) "
            f"{factor_text(p_q)}: {p_q.direction} (unadjusted; 'leaves' needs the interval within ×0.5–×2)")
    claim = "the all_ids budget puts the realised rate below p"
    budget = rates[rates["row"] == "budget"]
    if budget.empty:
        add(2, claim, NOT_YET_RUN, "")
    else:
        b = budget.iloc[0]
        # beta counts the specials at the band value the unseen rule gives them (0.8, the midpoint, here);
        # rate / p = (N + S) A / (A N + a_s S) with A the maskable tokens' mean band value: above 1 iff A > a_s
        evidence = (f"rate = p over all ids, specials included; rate/p over the budget row's {b.n_states} states: "
                    f"{b.rate_over_p_min:.4f}–{b.rate_over_p_max:.4f}; the specials enter beta at the band's "
                    f"midpoint 0.8, below the maskable tokens' mean band value "
                    f"({b.mean_band_value_min:.2f}–{b.mean_band_value_max:.2f}), so beta and the rate rise")
        combined = rates[rates["row"] == "all"]
        if not combined.empty:
            c = combined.iloc[0]
            evidence += (f"; with every 2023 rule at once ('all', {c.n_states} states: the specials at the top, 1.0, "
                         f"above the mean band value {c.mean_band_value_min:.2f}–{c.mean_band_value_max:.2f}) "
                         f"rate/p is {c.rate_over_p_min:.4f}–{c.rate_over_p_max:.4f}, below p as predicted")
        add(2, claim, "holds" if b.rate_over_p_max < 1 else "fails", evidence)
    for number, row in ((3, "unseen"), (3, "ema_start")):
        r = _row_unit(rows, row, "bernoulli")
        claim = f"'{row}' alone moves the KL by less than 2x either way"
        if r is None or pd.isna(r.get("change")):
            add(number, claim, NOT_YET_RUN if r is None else "not decided", "" if r is None else "fewer than two pairs")
            continue
        add(number, claim, within_factor(r.change_ci_low, r.change_ci_high), f"Bernoulli {factor_text(r)}")
    original = rows[~rows["row"].isin(list(ADDENDUM_AGAINST)) & rows["unit"].isin(PER_TOKEN)]
    reached = original[original["reaches_7e-4"] == True]  # noqa: E712 (None where untestable)
    add(4, "no row at 1 epoch reaches 7e-4 under the per-token Bernoulli KL",
        "fails" if len(reached) else "holds",
        "highest upper bounds of a 95 % interval (the first eight rows; 'all_plus' is prediction 9): " + ", ".join(
            f"{r.row} {r.kl_ci_high:.2g} ({r.unit})"
            for r in original.sort_values("kl_ci_high", ascending=False).head(2).itertuples()))
    claim = "along the curve the KL rises with the epochs"
    if curve is None or curve.empty:
        add(5, claim, NOT_YET_RUN, "")
    else:
        by_reading = {reading: table.set_index("unit").loc["bernoulli"] for reading, table in curve.groupby("reading")}
        c = curve[curve["unit"] == "bernoulli"].iloc[0]  # the end-of-epoch reading comes first: the registered one
        verdict = {"raises": "holds", "lowers": "fails"}.get(c.direction, "not decided")
        add(5, claim, verdict, "; ".join(
            f"{reading}: epoch {r.last_common_epoch} against epoch 1 over {r.runs} runs: ×{r.change:.2g} [95 % "
            f"{r.change_ci_low:.2g}, {r.change_ci_high:.2g}], {r.direction} (KL {r.kl_epoch1:.2g} → {r.kl_last:.2g})"
            for reading, r in sorted(by_reading.items(), key=lambda item: item[0] != c.reading)))
    for number, row, moved in ((6, "numerics", "fp32"), (7, "sampler", "random batches")):
        claim = f"{moved} ('{row}') moves the KL by less than 2x either way against '{ADDENDUM_AGAINST[row]}'"
        r = _row_unit(rows, row, "bernoulli")
        if r is None:
            add(number, claim, NOT_YET_RUN, "")
            continue
        if pd.isna(r.get("against_change")):
            add(number, claim, "not decided", f"{r.n_states} of {REGISTERED_PAIRS} states so far: a change needs two "
                f"pairs with '{ADDENDUM_AGAINST[row]}'")
            continue
        verdict = within_factor(r.against_change_ci_low_bonferroni, r.against_change_ci_high_bonferroni)
        partial = r.against_n_pairs < REGISTERED_PAIRS
        add(number, claim, "not decided" if partial else verdict,
            f"Bernoulli {factor_text(r, 'against_', bonferroni=True)}"
            + (f"; {r.against_n_pairs:.0f} of {REGISTERED_PAIRS} pairs so far" if partial else ""))
    claim = "max_length 512 leaves every state bit-identical to 'numerics', and 'all_plus' to 'sampler'"
    landed = identity if identity is not None else pd.DataFrame(columns=["row", "identical"])
    if not set(IDENTICAL_TO) & set(rows["row"]):
        add(8, claim, NOT_YET_RUN, "")
    elif identity is None:
        add(8, claim, "not decided", "the states' arrays were not compared")
    else:
        counts = {row: landed[landed["row"] == row] for row in IDENTICAL_TO}
        differ = sum(int((~c["identical"].astype(bool)).sum()) for c in counts.values())
        complete = all(len(c) == REGISTERED_PAIRS for c in counts.values())
        add(8, claim, "fails" if differ else "holds" if complete else "not decided", "; ".join(
            f"{row}: {int(c['identical'].astype(bool).sum())} of {len(c)} (task, seed) states bit-identical to "
            f"'{IDENTICAL_TO[row]}'" + ("" if len(c) == REGISTERED_PAIRS else f" ({REGISTERED_PAIRS} registered)")
            for row, c in counts.items()))
    claim = "'all_plus' does not reach 7e-4 under the per-token Bernoulli KL"
    mine = per_token_rows(rows, "all_plus")
    if mine.empty:
        add(9, claim, NOT_YET_RUN, "")
    else:
        reaches = bool((mine["reaches_7e-4"] == True).any())  # noqa: E712
        partial = int(mine["n_states"].iloc[0]) < REGISTERED_PAIRS
        add(9, claim, "not decided" if partial else "fails" if reaches else "holds", ", ".join(
            f"{r.unit} {r.kl:.2g} [95 % {r.kl_ci_low:.2g}, {r.kl_ci_high:.2g}; {r.n_states} states]"
            for r in mine.itertuples()))
    return pd.DataFrame(out)
