"""The addendum's rows as their states show them, beside the registered reading (issue 68).

The addendum registered four rows, each compared with the row it changes and Bonferroni over a family of 4
(:data:`~typhoon.studies.kl_original.design.ADDENDUM_AGAINST`). Two of them turned out to be other rows'
measurements, which the registered reading cannot say:

- a row whose states are, bit for bit, those of the row it is compared with ('max_length' against 'numerics':
  ``max_length`` only truncates, and no training sequence reaches 128 tokens) is **untestable** on these data.
  Its ratio is x1 by identity, not a finding, so it leaves the family; the training tokens at both settings,
  read from the states' counts, show why;
- a row whose states are those of another row ('all_plus', which differs from 'sampler' only in max_length) is
  **one measurement** with it, named once ('sampler = all_plus'), compared with each row either was registered
  against.

Which rows share their states is read from prediction 8's identity table (every registered pair bit-identical),
never assumed. The testable comparisons are the family of this reading. The registered reading stays where it
was (``tables/rows.csv``, the predictions); :func:`measured_addendum` puts it beside each line.
"""

from __future__ import annotations

import pandas as pd

from typhoon.studies.kl_original.design import ADDENDUM_AGAINST, SEEDS, TASKS
from typhoon.studies.kl_original.rows import paired_change

#: the registered pairs of a row: every task x seed
REGISTERED_PAIRS = len(TASKS) * len(SEEDS)
UNIT = "bernoulli"  # per token, the paper's unit


def same_states(identity: pd.DataFrame) -> dict[str, str]:
    """``{row: reference}`` for each row whose states are bit-identical to its reference row's at every
    registered (task, seed) pair (:func:`typhoon.studies.kl_original.verdicts.identity_table`); a row with a pair
    missing or differing is its own measurement."""
    found = {}
    for (row, reference), group in identity.groupby(["row", "reference"], sort=False):
        if len(group) == REGISTERED_PAIRS and group["identical"].astype(bool).all():
            found[row] = reference
    return found


def measurement_name(row: str, same: dict[str, str]) -> str:
    """A row as one measurement: 'sampler = all_plus' where all_plus's states are sampler's, else the row."""
    if row in same:
        return f"{same[row]} = {row}"
    twins = [other for other, reference in same.items() if reference == row]
    return " = ".join([row, *twins])


def training_tokens(states: pd.DataFrame, row: str) -> str:
    """'mrpc 195,290, cola 96,859 at max_length 512': the tokens of a row's training text per task (from its
    states' counts) and the max_length it was tokenized at."""
    mine = states[states["row"] == row]
    per_task = mine.groupby("task", sort=True)["training_tokens"].agg(["min", "max"])
    lengths = "/".join(str(length) for length in sorted(set(mine["max_length"])))
    return ", ".join(f"{task} {int(r['min']):,}" + ("" if r["min"] == r["max"] else f"–{int(r['max']):,}")
                     for task, r in per_task.iterrows()) + f" at max_length {lengths}"


def measured_addendum(states: pd.DataFrame, rows: pd.DataFrame, identity: pd.DataFrame) -> pd.DataFrame:
    """Per addendum comparison, as the states show it: the measurement (rows sharing their states named
    together), the row it is compared with, and either the paired change of the per-token Bernoulli KL with its
    95 % t interval, unadjusted and Bonferroni over the testable comparisons (``family``), or why it cannot be
    tested. ``registered``: the registered reading of the same line (Bonferroni over the addendum's 4)."""
    same = same_states(identity)
    lines, seen = [], set()
    for row, against in ADDENDUM_AGAINST.items():
        if (states["row"] == row).sum() == 0:
            continue
        measured = same.get(row, row)
        if (measured, against) in seen:
            continue  # the same states against the same row: one comparison
        seen.add((measured, against))
        registered = rows[(rows["row"] == row) & (rows["unit"] == UNIT)].iloc[0]
        line = {"measurement": measurement_name(row, same), "rows": row, "against": against,
                "n_states": int(registered.n_states), "kl": registered.kl,
                "registered": _registered_text(registered)}
        if measured == against:
            line.update(measurement=row, testable=False,
                        why=(f"its states are those of '{against}' bit for bit ({REGISTERED_PAIRS} of "
                             f"{REGISTERED_PAIRS}), so the ratio is ×1 by identity; training tokens "
                             f"{training_tokens(states, row)}, as '{against}' has {training_tokens(states, against)}"))
        else:
            line.update(testable=True, why="")
        lines.append(line)
    lines.sort(key=lambda line: not line["testable"])  # the untestable lines last
    family = sum(line["testable"] for line in lines)
    for line in lines:
        if line["testable"]:
            mine = states[states["row"] == line["rows"]]
            line.update(family=family, **paired_change(mine, states[states["row"] == line["against"]], UNIT, family))
    columns = ["measurement", "rows", "against", "testable", "family", "n_states", "kl", "n_pairs", "change",
               "change_ci_low", "change_ci_high", "change_ci_low_bonferroni", "change_ci_high_bonferroni", "direction",
               "direction_bonferroni", "why", "registered"]
    return pd.DataFrame(lines).reindex(columns=columns)


def _registered_text(r: pd.Series) -> str:
    """The registered reading of a line: its change against the row it changes, Bonferroni over the addendum's
    family, and the word the registered table gave it."""
    if pd.isna(r.get("against_change")):
        return "fewer than two pairs"
    return (f"×{r.against_change:.2g} [Bonferroni over {len(ADDENDUM_AGAINST)}: "
            f"{r.against_change_ci_low_bonferroni:.2g}, {r.against_change_ci_high_bonferroni:.2g}], "
            f"'{r.against_direction_bonferroni}'")


def measured_sentence(measured: pd.DataFrame) -> str:
    """The addendum's rows as they are, in one sentence (the README's answer, the results page)."""
    if measured.empty:
        return ""
    testable = measured[measured["testable"]]
    parts = [f"'{r.measurement}' {r.kl:.2g}, ×{r.change:.2g} [95 % {r.change_ci_low:.2g}, {r.change_ci_high:.2g}; "
             f"Bonferroni {r.change_ci_low_bonferroni:.2g}, {r.change_ci_high_bonferroni:.2g}; {r.n_pairs:.0f} pairs] "
             f"against '{r.against}', {r.direction_bonferroni}" for r in testable.itertuples() if pd.notna(r.change)]
    parts += [f"'{r.rows}' is untestable here: {r.why} (registered reading {r.registered}: an identity, not a "
              "finding)" for r in measured[~measured["testable"]].itertuples()]
    family = int(testable["family"].iloc[0]) if not testable.empty else 0
    return (f"The addendum's rows as their states show them (per-token Bernoulli KL against the row each changes; "
            f"Bonferroni over the {family} testable comparisons): " + "; ".join(parts) + ".")
