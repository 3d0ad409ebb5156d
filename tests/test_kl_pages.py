"""Every KL figure the pages quote about the kl-original study -- the results page's section and the README's
paragraph -- read from the study's committed tables and states (issue 68): each expected figure, formatted as the
pages print it, stands in its page, and every KL figure, factor and interval a page prints is one of them. A table
that changes without its page, or a figure typed by hand, fails here."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import REPO

pytestmark = pytest.mark.results
STUDY = REPO / "results" / "kl_original"
PAPER = 7e-4


def sci(x: float) -> str:
    """3.8e-4, as the pages print a KL."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e-{int(exponent[1:])}"


def g2(x: float) -> str:
    return f"{x:.2g}"


def interval(low: float, high: float, fmt=g2) -> str:
    return f"[{fmt(low)}, {fmt(high)}]"


@pytest.fixture(scope="module")
def figures() -> dict[str, str]:
    """Each quoted figure, by name, from the study's tables (and, for the token counts, its states)."""
    from typhoon.studies import kl_original as kl

    tables = {path.stem: pd.read_csv(path) for path in (STUDY / "tables").glob("*.csv")}
    rows = tables["rows"].set_index(["row", "unit"])
    every_rule, budget = rows.loc[("all_plus", "bernoulli")], rows.loc[("all_plus", "bernoulli_vs_budget")]
    baseline = rows.loc[("baseline", "bernoulli")]
    measured = tables["addendum_measured"].set_index(["rows", "against"])
    numerics, sampler, all_plus = (measured.loc[key] for key in (("numerics", "all"), ("sampler", "numerics"),
                                                                   ("all_plus", "all")))
    curve = tables["curve"].set_index(["reading", "unit"])
    ends, traced = curve.loc[(kl.END_OF_EPOCH, "bernoulli")], curve.loc[(kl.TRACE_READING, "bernoulli")]
    levels = tables["curve_levels"].set_index("kls")
    spread = tables["trace_spread"]
    states = kl.read_row_states(STUDY)
    tokens = states[states["row"] == "max_length"].groupby("task")["training_tokens"].first()
    p_row = rows.loc[("p", "masked_distribution")]
    return {
        "every rule": f"{sci(every_rule.kl)} [95 % {sci(every_rule.kl_ci_low)}, {sci(every_rule.kl_ci_high)}]",
        "every rule, the paper's": f"×{g2(every_rule.ratio_to_paper)}",
        "every rule, the paper's interval": interval(every_rule.kl_ci_low / PAPER, every_rule.kl_ci_high / PAPER,
                                                     lambda x: f"{x:.2f}"),
        "against the budget": f"{sci(budget.kl)} [{sci(budget.kl_ci_low)}, {sci(budget.kl_ci_high)}]",
        "baseline": sci(baseline.kl), "baseline, the paper's": f"×{g2(baseline.ratio_to_paper)}",
        "numerics": f"×{numerics.change:.3g} " + interval(numerics.change_ci_low_bonferroni,
                                                         numerics.change_ci_high_bonferroni),
        "sampler": f"×{g2(sampler.change)} " + interval(sampler.change_ci_low_bonferroni,
                                                       sampler.change_ci_high_bonferroni),
        "sampler, unadjusted": f"×{g2(sampler.change)} " + interval(sampler.change_ci_low, sampler.change_ci_high),
        "sampler, registered": interval(rows.loc[("sampler", "bernoulli")].against_change_ci_low_bonferroni,
                                        rows.loc[("sampler", "bernoulli")].against_change_ci_high_bonferroni),
        "all_plus against all": f"×{g2(all_plus.change)} " + interval(all_plus.change_ci_low_bonferroni,
                                                                     all_plus.change_ci_high_bonferroni),
        "tokens": f"MRPC {tokens['mrpc']:,}, CoLA {tokens['cola']:,}",
        "prediction 1": f"×{g2(p_row.change)} " + interval(p_row.change_ci_low, p_row.change_ci_high),
        "curve, end of epoch": f"epoch {ends.last_common_epoch} against epoch 1, ×{g2(ends.change)} "
                               + interval(ends.change_ci_low, ends.change_ci_high),
        "curve, trace mean": f"×{g2(traced.change)} " + interval(traced.change_ci_low, traced.change_ci_high),
        "levels": (f"{levels.loc['end-of-epoch states', 'above_7e-4']} of the {levels.loc['end-of-epoch states', 'n']:,}"
                   f" end-of-epoch states ({100 * levels.loc['end-of-epoch states', 'share_above']:.2g} %) and "
                   f"{levels.loc['trace snapshots', 'above_7e-4']} of the {levels.loc['trace snapshots', 'n']:,} trace "
                   f"snapshots ({100 * levels.loc['trace snapshots', 'share_above']:.2g} %)"),
        "medians": f"{sci(levels.loc['end-of-epoch states', 'median'])} and {sci(levels.loc['trace snapshots', 'median'])}",
        "medians, the paper's": f"×{levels['median_to_paper'].round(1).max():g}",
        "spread": f"×{g2(spread['highest_over_lowest'].max())}",
        "spread after epoch 1": f"×{g2(spread.loc[spread['epoch'] > 1, 'highest_over_lowest'].max())}",
    }


def section(path, start: str, end: str) -> str:
    text = path.read_text()
    return text[text.index(start):text.index(end, text.index(start))]


PAGES = {
    "results": (REPO / "docs" / "results.md", "## Why the KL is below the paper's", "### The 2023 code's own long-phase",
                ["every rule", "every rule, the paper's", "every rule, the paper's interval", "against the budget",
                 "baseline", "baseline, the paper's", "numerics", "sampler", "sampler, unadjusted", "sampler, registered",
                 "all_plus against all", "tokens", "prediction 1", "curve, trend", "curve, trace mean", "levels",
                 "medians", "medians, the paper's", "spread", "spread after epoch 1"]),
    "readme": (REPO / "README.md", "**The budget-spread bottleneck, measured.**", "## What the main job",
               ["every rule", "every rule, the paper's", "every rule, the paper's interval", "against the budget",
                "baseline", "baseline, the paper's"]),
}
# thresholds and identities the text names, not measurements
NOT_FIGURES = {"7e-4", "×1", "×2", "×0.5", "[1, 1]"}


def _expected_in(name: str, figures: dict[str, str]) -> list[str]:
    if name == "curve, trend":  # the page says it as "(registered: epoch 42 against epoch 1, ×1.2 [0.74, 1.9]"
        return [figures["curve, end of epoch"]]
    return [figures[name]]


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_kl_figure_a_page_quotes_is_the_studys_table_value(page, figures):
    path, start, end, names = PAGES[page]
    text = " ".join(section(path, start, end).split())  # one line: the pages wrap their sentences
    missing = [(name, want) for name in names for want in _expected_in(name, figures) if want not in text]
    assert not missing, f"{path.name}: figures not quoted as the tables give them: {missing}"
    known = " ".join(figures.values())
    printed = set(re.findall(r"\d+(?:\.\d+)?e-\d+|×\d+(?:\.\d+)?|\[\d+(?:\.\d+)?, \d+(?:\.\d+)?\]", text))
    stray = sorted(figure for figure in printed - NOT_FIGURES if figure not in known)
    assert not stray, f"{path.name}: figures that no table of the study gives: {stray}"
