"""The kl-original study's rows (design and hypothesis: :mod:`typhoon.studies.kl_original.design`; runs:
:class:`typhoon.studies.kl_original.policy.KlOriginalRows`): each finished state read back, the t interval every table uses, and two tables.

- :func:`rows_table`: per row (a 2023 rule, alone or all together, at 1 MLM epoch) and KL definition
  (:data:`typhoon.analysis.kl.units.KL_DEFINITIONS`, nats and bits): the geometric-mean KL of its (task, seed)
  states with the 95 % t interval of the mean log KL, its ratio to the paper's 7e-4, the paired change against
  the baseline's state of the same task and seed (95 %, unadjusted and Bonferroni over the row's family), and
  the two registered criteria: 'reaches 7e-4' (the interval contains it) and 'within 3x' (the interval lies
  inside [7e-4/3, 3 x 7e-4]);
  an addendum row is also compared with the row it changes (``against``);
- :func:`identical_states`: whether two rows' states are bit for bit the same (prediction 8);
- :func:`rate_table`: per row, the realised masking rate against the budget p and the spread of the per-type rates.

A state's KLs are recomputed here from its ``masking_state.npz`` (probabilities and counts) and its run's
``n_train``, not read from what the run printed. The curve is :mod:`typhoon.studies.kl_original.curve`'s, the
fine-tuned pairs :mod:`typhoon.studies.kl_original.finetune`'s, the predictions and the README
:mod:`typhoon.studies.kl_original.report`'s.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as st

from typhoon.analysis.kl import (
    KL_DEFINITIONS,
    PAPER_KL_NATS_PER_TOKEN,
    kl_definitions,
    load_masking_state,
    rate_spread,
)
from typhoon.studies.kl_gap.design import RUN_FILE, STATE_FILE
from typhoon.studies.kl_original.design import ADDENDUM_AGAINST, BONFERRONI_FAMILY, ROWS

BASELINE = "baseline"
KL_FACTOR = 3.0  # 'within 3x': the KL-gap study's criterion for closing the gap
#: every definition in nats and in bits: the table's 10 units
UNITS = [name for base in KL_DEFINITIONS for name in (base, f"{base}_bits")]


def paper_kl(unit: str) -> float:
    """The paper's 7e-4 nats/token in ``unit``'s measure: nats, or bits for the ``_bits`` units (7e-4 / ln 2)."""
    return PAPER_KL_NATS_PER_TOKEN / (math.log(2) if unit.endswith("_bits") else 1.0)


def read_row_states(out: str | Path) -> pd.DataFrame:
    """One row per finished state of ``out/states/<row>/<task>/seed<k>/``: its KL under every definition,
    realised rate, spread of the rates, training tokens, MLM losses and numerics."""
    records = []
    for run_file in sorted(Path(out).glob(f"states/*/*/seed*/{RUN_FILE}")):
        folder = run_file.parent
        summary = json.loads(run_file.read_text())
        state = load_masking_state(folder / STATE_FILE)
        p = float(summary["config"]["p"])
        numerics = summary.get("numerics", {})
        records.append({"row": folder.parts[-3], "task": folder.parts[-2], "seed": int(folder.name[4:]), "p": p,
                        "max_length": summary["config"].get("max_length"),
                        **kl_definitions(state["probs"], state["counts"], p, int(summary["n_train"])),
                        **rate_spread(state["probs"], state["counts"]),
                        # the token-weighted mean band value of the maskable types: the top type sits at 1
                        "mean_band_value": float(np.dot(state["probs"], state["counts"]) / state["counts"].sum()
                                                 / state["probs"].max()),
                        # every token of the training text, specials included where the state counts them
                        "training_tokens": int(state["counts"].sum()) + int(np.sum(state.get("special_counts", 0))),
                        "mlm_first_loss": summary.get("mlm_first_loss"), "mlm_dev_loss": summary.get("mlm_dev_loss"),
                        "numerics": f"{numerics.get('precision')} on {numerics.get('device')}"})
    return pd.DataFrame(records)


def t_interval(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` and its two-sided t interval (NaN bounds for fewer than two values)."""
    values = np.asarray(values, dtype=float)
    n, mean = values.size, float(np.mean(values))
    if n < 2:
        return mean, math.nan, math.nan
    half = st.t.ppf(0.5 + confidence / 2, n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half


#: a factor within which an interval that holds x1 says the KL is left as it was (prediction 3's "less than 2x")
LEAVES_FACTOR = 2.0


def change_direction(low: float, high: float) -> str:
    """What the interval [exp(low), exp(high)] of a ratio says: 'raises' or 'lowers' when it excludes x1;
    'leaves' when it holds x1 and lies within [x1/2, x2]; otherwise 'not detected': the interval holds x1 and a
    halving or a doubling (most often both), so no change is seen and none is ruled out."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "not testable"
    if low > 0 or high < 0:
        return "raises" if low > 0 else "lowers"
    inside = -math.log(LEAVES_FACTOR) <= low and high <= math.log(LEAVES_FACTOR)
    return "leaves" if inside else "not detected"


def paired_change(mine: pd.DataFrame, other: pd.DataFrame, unit: str, family: int, prefix: str = "") -> dict:
    """The change of ``unit``'s KL from ``other``'s states to ``mine``, each (task, seed) paired: the geometric
    mean ratio with the 95 % t interval of the mean log ratio, unadjusted and Bonferroni over ``family``
    comparisons, and what each says (:func:`change_direction`). Empty below two pairs. Keys prefixed ``prefix``."""
    paired = mine.merge(other, on=["task", "seed"], suffixes=("", "_other"))
    if len(paired) < 2:
        return {}
    log_ratio = np.log(paired[unit].to_numpy(float)) - np.log(paired[f"{unit}_other"].to_numpy(float))
    change, c_low, c_high = t_interval(log_ratio)
    _, b_low, b_high = t_interval(log_ratio, 1 - 0.05 / family)
    entry = {"n_pairs": len(paired), "change": math.exp(change), "change_ci_low": math.exp(c_low),
             "change_ci_high": math.exp(c_high), "change_ci_low_bonferroni": math.exp(b_low),
             "change_ci_high_bonferroni": math.exp(b_high), "direction": change_direction(c_low, c_high),
             "direction_bonferroni": change_direction(b_low, b_high)}
    return {f"{prefix}{key}": value for key, value in entry.items()}


def rows_table(states: pd.DataFrame) -> pd.DataFrame:
    """Per (row, unit): the geometric-mean KL with its 95 % interval over the row's states, its ratio to
    7e-4, the paired change against the baseline and the two criteria (module docstring); an addendum row
    (:data:`~typhoon.studies.kl_original.design.ADDENDUM_AGAINST`) also against the row it changes
    (``against`` and the ``*_against`` columns), Bonferroni over its own family. Only the rows with states are
    listed (:func:`rows_not_yet_run` names the others); a change needs at least two (task, seed) pairs."""
    if states.empty:
        raise FileNotFoundError("no finished state of the kl-original study (states/<row>/<task>/seed<k>/)")
    baseline = states[states["row"] == BASELINE]
    out = []
    for row in [r.name for r in ROWS if (states["row"] == r.name).any()]:
        mine = states[states["row"] == row]
        against = ADDENDUM_AGAINST.get(row)
        for unit in UNITS:
            paper = paper_kl(unit)  # 7e-4 nats in the unit's measure: a bits row is judged as its nats twin
            mean, low, high = t_interval(np.log(mine[unit].to_numpy(float)))
            entry = {"row": row, "unit": unit, "n_states": len(mine), "kl": math.exp(mean),
                     "kl_ci_low": math.exp(low), "kl_ci_high": math.exp(high),
                     "ratio_to_paper": math.exp(mean) / paper,
                     "reaches_7e-4": (low <= math.log(paper) <= high) if math.isfinite(low) else None,
                     "within_3x": (paper / KL_FACTOR <= math.exp(low) and math.exp(high) <= paper * KL_FACTOR)
                     if math.isfinite(low) else None}
            if row != BASELINE:
                entry.update(paired_change(mine, baseline, unit, BONFERRONI_FAMILY[row]))
            if against is not None:
                entry.update(against=against, **paired_change(mine, states[states["row"] == against], unit,
                                                               BONFERRONI_FAMILY[row], "against_"))
            out.append(entry)
    change_columns = ["n_pairs", "change", "change_ci_low", "change_ci_high", "change_ci_low_bonferroni",
                      "change_ci_high_bonferroni", "direction", "direction_bonferroni"]
    columns = ["row", "unit", "n_states", "kl", "kl_ci_low", "kl_ci_high", "ratio_to_paper", "reaches_7e-4",
               "within_3x", *change_columns, "against", *[f"against_{c}" for c in change_columns]]
    return pd.DataFrame(out).reindex(columns=columns)


def rows_not_yet_run(states: pd.DataFrame) -> list[str]:
    """The registered rows with no finished state yet: listed as 'not yet run', never given a verdict."""
    have = set(states["row"]) if not states.empty else set()
    return [row.name for row in ROWS if row.name not in have]


def identical_states(out: str | Path, row: str, reference: str) -> pd.DataFrame:
    """Per (task, seed) that both rows have: whether ``row``'s masking state is bit for bit ``reference``'s,
    every array of the two ``masking_state.npz`` (weights, counts, seen, probs, ...) equal in dtype, shape and
    bytes (prediction 8; a never-seen type's NaN weight equals itself, as numpy's == would not say). The ``meta``
    entry, a summary written beside the arrays, is not compared."""
    found = []
    for folder in sorted(Path(out).glob(f"states/{row}/*/seed*")):
        other = Path(out) / "states" / reference / folder.parent.name / folder.name
        if not ((folder / RUN_FILE).is_file() and (other / RUN_FILE).is_file()):
            continue
        with np.load(folder / STATE_FILE) as a, np.load(other / STATE_FILE) as b:
            names = sorted(set(a.files) - {"meta"})
            same = names == sorted(set(b.files) - {"meta"}) and all(
                a[n].dtype == b[n].dtype and a[n].shape == b[n].shape and a[n].tobytes() == b[n].tobytes()
                for n in names)
        found.append({"row": row, "reference": reference, "task": folder.parent.name, "seed": int(folder.name[4:]),
                      "identical": bool(same)})
    return pd.DataFrame(found, columns=["row", "reference", "task", "seed", "identical"])


def rate_table(states: pd.DataFrame) -> pd.DataFrame:
    """Per row: the realised masking rate against the budget p (mean, min, max over its states) and the
    spread of the per-type rates (the lowest and highest over its states, the mean frequency-weighted sd):
    prediction (2) is about the first."""
    states = states.assign(rate_over_p=states["realised_rate"] / states["p"])
    grouped = states.groupby("row", sort=False)
    return pd.DataFrame({"p": grouped["p"].first(), "n_states": grouped.size(),
                         "rate_over_p_mean": grouped["rate_over_p"].mean(),
                         "rate_over_p_min": grouped["rate_over_p"].min(),
                         "rate_over_p_max": grouped["rate_over_p"].max(),
                         "mean_band_value_min": grouped["mean_band_value"].min(),
                         "mean_band_value_max": grouped["mean_band_value"].max(),
                         "pi_min": grouped["pi_min"].min(), "pi_max": grouped["pi_max"].max(),
                         "pi_sd_mean": grouped["pi_sd"].mean()}).reset_index()
