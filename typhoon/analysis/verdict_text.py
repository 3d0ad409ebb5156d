"""The comparisons in words: the conclusion a notebook prints and the comparisons that could not be tested."""

from __future__ import annotations

import pandas as pd

from typhoon.analysis.pairwise import FAMILY_REF, UNTESTABLE
from typhoon.analysis.run_summary import margin_text, require_columns
from typhoon.analysis.significance import ASO_TAU, POWER_TARGET, null_power_text, paired_t_power


# --------------------------------------------------------------------------------------------------
# conclusion
# --------------------------------------------------------------------------------------------------
def _label(r) -> str:
    return f"{r.task}/{r.backbone} {r.strategy_a} vs {r.strategy_b}"


def not_significant_power(n_seeds, alpha: float = 0.05) -> str | None:
    """What a non-significant paired t-test could see at the fewest seeds of ``n_seeds``: 'consistent with no
    difference, but at a power of 0.08 (paired t, 3 seeds, dz 0.5) this says little'; None where that power
    reaches :data:`~typhoon.analysis.significance.POWER_TARGET`."""
    n = int(min(n_seeds))
    if paired_t_power(n, alpha=alpha) >= POWER_TARGET:
        return None
    return f"consistent with no difference, but at {null_power_text(n, alpha=alpha)} this says little"


def conclusion(comparisons: pd.DataFrame, alpha: float | None = None, tau: float = ASO_TAU) -> str:
    """One paragraph stating what the comparisons support, built from the numbers in the table.

    Uses the ``vs_reference`` family when present (else all comparisons). Comparisons that cannot be
    tested (``testable`` False) are named as such, apart from the rest: never counted as significant,
    equivalent or inconclusive. ASO calls a strategy better when its epsilon_min < ``tau``.
    """
    require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "family", "n", "p", "p_holm",
                                  "mean_diff", "ci_low", "ci_high", "tost_p", "margin", "testable",
                                  "boot_ci_low", "boot_ci_high", "aso_eps_ab", "aso_eps_ba", "note"],
                    what="comparisons")
    alpha = comparisons.attrs.get("alpha", 0.05) if alpha is None else alpha
    level = f"{100 * comparisons.attrs.get('confidence', 0.95):g}%"
    if comparisons.empty:
        return "No comparisons could be made (fewer than two strategies in every task/backbone)."
    fam = comparisons[comparisons["family"] == FAMILY_REF]
    scope = "against the reference strategy"
    if fam.empty:
        fam = comparisons
        scope = "between strategies (the reference strategy is absent)"
    testable = fam["testable"].astype(bool)
    tested, untested = fam[testable], fam[~testable]
    margin = margin_text(fam)
    parts = []
    if tested.empty:
        parts.append(f"None of the {len(fam)} comparisons {scope} could be tested (each needs at least "
                     "two paired seeds whose differences vary).")
    else:
        parts.extend(_tested_sentences(tested, scope, alpha, level, margin, tau))
    if not untested.empty:
        parts.append(f"{len(untested)} comparison(s) {UNTESTABLE}, so they are neither significant nor "
                     "equivalent: " + "; ".join(f"{_label(r)} ({r.note})" for r in untested.itertuples())
                     + ".")
    return " ".join(parts)


def _tested_sentences(tested: pd.DataFrame, scope: str, alpha: float, level: str, margin: str,
                      tau: float) -> list[str]:
    n = len(tested)
    sig = tested[tested["p_holm"] < alpha]
    unadj = tested[tested["p"] < alpha]
    ci0 = tested[(tested["ci_low"] <= 0) & (tested["ci_high"] >= 0)]
    boot0 = tested[(tested["boot_ci_low"] <= 0) & (tested["boot_ci_high"] >= 0)]
    eq = tested[tested["tost_p"] < alpha]
    parts = [f"{n} paired comparison(s) {scope} were tested."]
    if sig.empty:
        power = not_significant_power(tested["n"], alpha)
        parts.append(f"None is significant after Holm correction (alpha = {alpha:g}; "
                     f"{len(unadj)} had unadjusted p < {alpha:g}; smallest Holm p = "
                     f"{tested['p_holm'].min():.3g})" + (f": {power}." if power else "."))
    else:
        items = ", ".join(f"{_label(r)} (diff {r.mean_diff:+.4f}, Holm p = {r.p_holm:.3g})"
                          for r in sig.itertuples())
        parts.append(f"{len(sig)} significant after Holm correction (alpha = {alpha:g}): {items}.")
    parts.append(f"{len(ci0)} of {n} {level} t CIs of the mean difference contain 0 "
                 f"({len(boot0)} of the bootstrap CIs, which are too narrow with few seeds).")
    if eq.empty:
        parts.append(f"TOST shows equivalence within {margin} for none of them, so the data cannot "
                     f"rule out differences of that size (absence of evidence is not evidence of absence).")
    elif len(eq) == n:
        parts.append(f"TOST shows equivalence within {margin} for all {n}.")
    else:
        items = ", ".join(_label(r) for r in eq.itertuples())
        parts.append(f"TOST shows equivalence within {margin} for {len(eq)} of {n}: {items}; "
                     "the others are inconclusive at that margin.")
    a_better = tested[tested["aso_eps_ab"] < tau]
    b_better = tested[tested["aso_eps_ba"] < tau]
    if a_better.empty and b_better.empty:
        parts.append(f"Almost stochastic order (epsilon_min < {tau:g}, uncorrected) calls neither strategy "
                     f"better in any of the {n}.")
    else:
        items = [f"{r.strategy_a} over {r.strategy_b} in {r.task}/{r.backbone} "
                 f"(epsilon_min = {r.aso_eps_ab:.3g})" for r in a_better.itertuples()]
        items += [f"{r.strategy_b} over {r.strategy_a} in {r.task}/{r.backbone} "
                  f"(epsilon_min = {r.aso_eps_ba:.3g})" for r in b_better.itertuples()]
        parts.append(f"Almost stochastic order (epsilon_min < {tau:g}, uncorrected) calls one strategy "
                     f"better in {len(items)} of {n}: {', '.join(items)}.")
    return parts


def skipped(comparisons: pd.DataFrame) -> list[str]:
    """One line per comparison that could not be tested (or dropped seeds), saying why."""
    require_columns(comparisons, ["task", "backbone", "strategy_a", "strategy_b", "testable", "note"],
                    what="comparisons")
    out = []
    for r in comparisons.itertuples():
        if not r.testable or "dropped" in r.note:
            out.append(f"{_label(r)}: {r.note or 'not tested'}")
    return out
