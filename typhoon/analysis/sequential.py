"""Group-sequential analysis of paired differences: at each pre-registered look (a number of seeds) a
comparison is declared **different** (two-sided test of H0: Δ = 0), **equivalent** (two one-sided tests
within ±margin: the (1 − 2α) repeated confidence interval lies inside the margin), told to **continue**,
or, at the last look (the cap), left **undecided at cap** -- with each error spent across the looks by a
Lan-DeMets alpha-spending function.

Methods, with the papers they come from:

- **Alpha spending** (Lan & DeMets 1983, *Biometrika* 70:659-663): the error spent by information
  fraction t is α*(t); O'Brien-Fleming type α*(t) = 2 − 2Φ(z_{1−α/2}/√t), Pocock type
  α*(t) = α·log(1 + (e − 1)t) (Lan & DeMets 1983), and the power family α·t^ρ (Kim & DeMets 1987,
  Jennison & Turnbull 2000, §7.2). The information fraction of a look is its seed count over the cap.
- **Boundaries and exit probabilities** by the recursive numerical integration of Armitage, McPherson &
  Rowe (1969, *JRSS A* 132:235-244), on the score scale S_k = Z_k√I_k whose increments are independent
  normal, integrated with Simpson's rule as in Jennison & Turnbull (2000, *Group Sequential Methods with
  Applications to Clinical Trials*, ch. 19). Tested against their Tables 2.7, 2.8, 2.9 and 7.2.
- **Equivalence** by repeated confidence intervals (Jennison & Turnbull 1989, *JRSS B* 51:305-361;
  2000, ch. 9): equivalence is declared when the interval with one-sided boundaries at level α on each
  side lies inside ±margin -- a TOST (Schuirmann 1987) at every look, its error spent like the test's.
- **Unknown variance, few seeds**: the normal-theory boundary c_k of a look is used on the t statistic
  as the t quantile with the same nominal tail probability, t_{n_k−1}^{−1}(Φ(c_k)) (the "significance
  level" approximation for group-sequential t-tests, Pocock 1977, *Biometrika* 64:191-199; Jennison &
  Turnbull 2000, §3.8). That it keeps the error rates at the study's seed counts is checked by simulation
  (:func:`simulate_design`, tests/test_sequential.py), not assumed.

Stopping for one decision only removes chances of the other error, so each error rate stays below its
spent α whatever the other boundary does (the boundaries are non-binding for each other).

One function per question: :func:`design_boundaries` (the boundaries of a design, a tidy table),
:func:`analyse_look` (the verdicts at one look), :func:`analyse_history` (every look, each comparison
stopped at its first decision), :func:`simulate_design` (operating characteristics).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import stats as st

SPENDING = ("obrien_fleming", "pocock", "power")
VERDICTS = ("equivalent", "different", "continue", "undecided at cap")
GRID_POINTS = 241  # Simpson points per look: boundaries to 4 decimals (Jennison & Turnbull ch. 19 use about 6r = 108)
TAIL_SD = 10.0  # an open side of the continuation region is cut this many sd from the mean


# --------------------------------------------------------------------------------------------------
# Spending functions and the recursive integration


def spent(spending: str, alpha: float, t, rho: float = 1.0) -> np.ndarray:
    """Cumulative error α*(t) spent by information fraction ``t`` (α*(1) = α) under a Lan-DeMets spending
    function: ``obrien_fleming`` (2 − 2Φ(z_{1−α/2}/√t)), ``pocock`` (α log(1 + (e−1)t)) or ``power``
    (α t^ρ)."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0)
    if spending == "obrien_fleming":
        with np.errstate(divide="ignore"):
            return np.where(t > 0, 2.0 - 2.0 * st.norm.cdf(st.norm.ppf(1 - alpha / 2) / np.sqrt(t)), 0.0)
    if spending == "pocock":
        return alpha * np.log1p((math.e - 1.0) * t)
    if spending == "power":
        return alpha * t ** rho
    raise ValueError(f"unknown spending function {spending!r}; choose one of {SPENDING}")


def _simpson_grid(lo: float, hi: float, points: int = GRID_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Points and Simpson weights on [lo, hi] (an odd number of points)."""
    points += 1 - points % 2
    x = np.linspace(lo, hi, points)
    w = np.ones(points)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return x, w * (hi - lo) / (3.0 * (points - 1))


@dataclass
class _Look:
    """The sub-density of S_k on the continuation region of look k (grid, weights times density)."""

    s: np.ndarray
    mass: np.ndarray  # Simpson weight × density: a sum over it integrates
    info: float


def _start(info: float, theta: float) -> _Look:
    """Before any look: all mass at S = 0 with information 0 (a point, handled exactly)."""
    return _Look(np.array([0.0]), np.array([1.0]), 0.0)


def _exit_probabilities(prev: _Look, info: float, theta: float, lower: float, upper: float) -> tuple[float, float]:
    """P(continue to look k, then Z_k ≥ upper) and P(..., Z_k ≤ lower), from the previous sub-density."""
    step = info - prev.info
    mean, sd = prev.s + theta * step, math.sqrt(step)
    root = math.sqrt(info)
    up = float(np.sum(prev.mass * st.norm.sf((upper * root - mean) / sd))) if np.isfinite(upper) else 0.0
    down = float(np.sum(prev.mass * st.norm.cdf((lower * root - mean) / sd))) if np.isfinite(lower) else 0.0
    return up, down


def _continue(prev: _Look, info: float, theta: float, lower: float, upper: float) -> _Look:
    """The sub-density of S_k on (lower, upper) (Z scale) at look k: the convolution of the previous
    sub-density with the normal increment (Armitage, McPherson & Rowe 1969)."""
    step = info - prev.info
    root = math.sqrt(info)
    centre, spread = theta * info, TAIL_SD * root
    lo = lower * root if np.isfinite(lower) else centre - spread
    hi = upper * root if np.isfinite(upper) else centre + spread
    s, w = _simpson_grid(lo, hi)
    sd = math.sqrt(step)
    density = (prev.mass[None, :] * st.norm.pdf((s[:, None] - prev.s[None, :] - theta * step) / sd)).sum(1) / sd
    return _Look(s, w * density, info)


def crossing_probabilities(lower: Sequence[float], upper: Sequence[float], information: Sequence[float],
                           theta: float = 0.0) -> pd.DataFrame:
    """Per look k: the probability of first leaving the continuation region (lower_k, upper_k) of the Z
    statistic above (``p_upper``) and below (``p_lower``) at look k, when Z_k = S_k/√I_k and S has drift
    ``theta`` per unit information (Armitage, McPherson & Rowe 1969). ±inf: no boundary on that side."""
    state = _start(information[0], theta)
    rows = []
    for k, (a, b, info) in enumerate(zip(lower, upper, information, strict=True)):
        up, down = _exit_probabilities(state, info, theta, a, b)
        rows.append({"look": k + 1, "information": info, "p_upper": up, "p_lower": down})
        if k + 1 < len(information):
            state = _continue(state, info, theta, a, b)
    return pd.DataFrame(rows)


def spending_boundaries(fractions: Sequence[float], alpha: float, spending: str = "obrien_fleming",
                        sides: int = 2, rho: float = 1.0) -> np.ndarray:
    """Z boundaries c_1..c_K at information ``fractions`` that spend ``alpha`` (two-sided, symmetric
    ±c_k, when ``sides`` = 2; one upper boundary when 1) by a Lan-DeMets spending function (Lan & DeMets
    1983): under H0 the probability of first crossing at look k is α*(t_k) − α*(t_{k−1}); two-sided, each
    side spends α*(t) at level α/2."""
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides}")
    fractions = np.asarray(fractions, float)
    if np.any(np.diff(fractions) <= 0) or fractions[0] <= 0 or fractions[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase within (0, 1], got {fractions.tolist()}")
    # two-sided: α/2 spent on each side by the one-sided function (the convention of Lan & DeMets'
    # tables and gsDesign's symmetric designs; the same as α for the pocock and power families)
    cumulative = spent(spending, alpha, fractions, rho) if sides == 1 else 2 * spent(spending, alpha / 2, fractions, rho)
    increments = np.diff(np.concatenate([[0.0], cumulative]))
    state, bounds = _start(fractions[0], 0.0), []
    for info, target in zip(fractions, increments, strict=True):
        def excess(c, info=info, target=target, state=state):
            up, down = _exit_probabilities(state, info, 0.0, -c if sides == 2 else -np.inf, c)
            return up + down - target
        c = np.inf if target <= 1e-15 else optimize.brentq(excess, 0.0, 40.0, xtol=1e-10)
        bounds.append(c)
        state = _continue(state, info, 0.0, -min(c, 40.0) if sides == 2 else -np.inf, min(c, 40.0))
    return np.array(bounds)


def constant_shape_boundaries(fractions: Sequence[float], alpha: float, delta: float) -> np.ndarray:
    """The Wang & Tsiatis (1987) two-sided boundaries c_k = C·t_k^(Δ−1/2) with the constant C solved
    for level ``alpha``: Δ = 0.5 is Pocock's (1977) test, Δ = 0 O'Brien & Fleming's (1979)."""
    fractions = np.asarray(fractions, float)
    shape = fractions ** (delta - 0.5)

    def excess(c):
        table = crossing_probabilities(-c * shape, c * shape, fractions)
        return float(table["p_upper"].sum() + table["p_lower"].sum()) - alpha
    return optimize.brentq(excess, 1.0, 10.0, xtol=1e-10) * shape


def max_information_ratio(bounds: Sequence[float], fractions: Sequence[float], alpha: float, power: float,
                          sides: int = 2) -> tuple[float, list[float]]:
    """``R``: the maximum information of the design relative to the fixed-sample test of the same level
    and power (Jennison & Turnbull 2000, Tables 2.7-2.9, 7.2), and the expected information at drift
    0, δ/2, δ, 3δ/2 relative to the fixed sample (the tables' E(N)/n_fix)."""
    fractions, bounds = np.asarray(fractions, float), np.asarray(bounds, float)
    z_fixed = st.norm.ppf(1 - alpha / sides) + st.norm.ppf(power)
    lower = -bounds if sides == 2 else np.full_like(bounds, -np.inf)

    def power_at(r):  # drift δ = z_fixed (unit fixed information), max information r
        table = crossing_probabilities(lower, bounds, fractions * r, z_fixed)
        return float(table["p_upper"].sum())
    ratio = optimize.brentq(lambda r: power_at(r) - power, 1.0, 3.0, xtol=1e-10)
    expected = []
    for theta in (0.0, 0.5, 1.0, 1.5):
        table = crossing_probabilities(lower, bounds, fractions * ratio, theta * z_fixed)
        stop = (table["p_upper"] + table["p_lower"]).to_numpy(copy=True)
        stop[-1] = 1.0 - stop[:-1].sum()
        expected.append(float((stop * fractions * ratio).sum()))
    return ratio, expected


# --------------------------------------------------------------------------------------------------
# The design of the study


@dataclass(frozen=True)
class Design:
    """A group-sequential design for paired differences: the looks (seed counts, the last is the cap),
    the error of each decision per comparison, and the spending function."""

    looks: tuple[int, ...]
    alpha_different: float  # two-sided, per comparison
    alpha_equivalent: float  # per side of the TOST, per comparison
    spending: str = "obrien_fleming"
    rho: float = 1.0  # the power family's exponent (spending = "power")

    def __post_init__(self):
        looks = tuple(int(n) for n in self.looks)
        if not looks or looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:], strict=False)):
            raise ValueError(f"looks must be increasing seed counts >= 2, got {list(self.looks)}")
        for name in ("alpha_different", "alpha_equivalent"):
            if not 0 < getattr(self, name) < 0.5:
                raise ValueError(f"{name} must be in (0, 0.5), got {getattr(self, name)}")
        if self.spending not in SPENDING:
            raise ValueError(f"unknown spending function {self.spending!r}; choose one of {SPENDING}")
        object.__setattr__(self, "looks", looks)

    @property
    def cap(self) -> int:
        return self.looks[-1]

    @property
    def fractions(self) -> np.ndarray:
        return np.asarray(self.looks, float) / self.cap


def design_boundaries(design: Design) -> pd.DataFrame:
    """One row per look: ``n_seeds``, information ``fraction``, the error spent so far by each decision
    (``spent_different``, two-sided; ``spent_equivalent``, per side), the Z boundaries
    (``z_different``: |Z| beyond it is "different"; ``z_equivalent``: the one-sided boundary of each
    TOST) and the same boundaries on the t statistic of the look (``t_different``, ``t_equivalent``:
    t quantiles with n − 1 degrees of freedom at the same nominal tail probability)."""
    fractions = design.fractions
    z_diff = spending_boundaries(fractions, design.alpha_different, design.spending, 2, design.rho)
    z_eq = spending_boundaries(fractions, design.alpha_equivalent, design.spending, 1, design.rho)
    dof = np.asarray(design.looks) - 1
    return pd.DataFrame({
        "look": np.arange(1, len(design.looks) + 1), "n_seeds": design.looks, "fraction": fractions,
        "spent_different": 2 * spent(design.spending, design.alpha_different / 2, fractions, design.rho),
        "spent_equivalent": spent(design.spending, design.alpha_equivalent, fractions, design.rho),
        "z_different": z_diff, "z_equivalent": z_eq,
        "t_different": st.t.isf(st.norm.sf(z_diff), dof), "t_equivalent": st.t.isf(st.norm.sf(z_eq), dof),
    })


# --------------------------------------------------------------------------------------------------
# Analysis


LOOK_COLUMNS = ["comparison", "look", "n_seeds", "difference", "sd", "se", "t_different", "t_equivalent",
                "ci_low", "ci_high", "tost_low", "tost_high", "margin", "verdict"]


def _verdict(lo_diff, hi_diff, lo_eq, hi_eq, margin, at_cap):
    """Equivalence first: a difference inside the margin is "equivalent" even where it excludes 0 (a
    real difference too small to matter)."""
    equivalent = (lo_eq > -margin) & (hi_eq < margin)
    different = (lo_diff > 0) | (hi_diff < 0)
    return np.where(equivalent, "equivalent", np.where(different, "different",
                                                       "undecided at cap" if at_cap else "continue"))


def analyse_look(differences_by_comparison: Mapping[str, Sequence[float]], design: Design, look: int,
                 margins: Mapping[str, float], boundaries: pd.DataFrame | None = None) -> pd.DataFrame:
    """The verdict of each comparison at ``look`` (1-based), from its first n_seeds paired differences.

    ``differences_by_comparison``: comparison name -> differences in seed order (at least the look's seed
    count); ``margins``: comparison name -> equivalence margin. The repeated confidence intervals are
    ``difference ± t·se`` with the look's t boundaries: ``ci_*`` two-sided for "different", ``tost_*``
    one-sided on each side for "equivalent"."""
    table = design_boundaries(design) if boundaries is None else boundaries
    if not 1 <= look <= len(design.looks):
        raise ValueError(f"look must be in 1..{len(design.looks)}, got {look}")
    bound = table.iloc[look - 1]
    n = int(bound["n_seeds"])
    rows = []
    for name, values in differences_by_comparison.items():
        d = np.asarray(values, float)
        if len(d) < n or not np.all(np.isfinite(d[:n])):
            raise ValueError(f"comparison {name!r}: look {look} needs {n} finite paired differences, got {len(d)}")
        d = d[:n]
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        se = sd / math.sqrt(n)
        t_diff, t_eq = float(bound["t_different"]), float(bound["t_equivalent"])
        row = dict(comparison=name, look=look, n_seeds=n, difference=mean, sd=sd, se=se, t_different=t_diff,
                   t_equivalent=t_eq, ci_low=mean - t_diff * se, ci_high=mean + t_diff * se,
                   tost_low=mean - t_eq * se, tost_high=mean + t_eq * se, margin=float(margins[name]))
        row["verdict"] = str(_verdict(row["ci_low"], row["ci_high"], row["tost_low"], row["tost_high"],
                                      row["margin"], look == len(design.looks)))
        rows.append(row)
    return pd.DataFrame(rows, columns=LOOK_COLUMNS)


def analyse_history(differences_by_comparison: Mapping[str, Sequence[float]], design: Design,
                    margins: Mapping[str, float]) -> pd.DataFrame:
    """Every look each comparison has reached, in order; a comparison stops at its first decision
    (its later rows are never analysed: the verdict is the one at its stopping look), and at the first
    look whose seeds it does not have yet (the caller trains them). One row per (comparison, look)."""
    table = design_boundaries(design)
    frames = []
    for name, values in differences_by_comparison.items():
        for look, n in enumerate(design.looks, start=1):
            if len(values) < n:
                break
            row = analyse_look({name: values}, design, look, margins, table)
            frames.append(row)
            if row["verdict"].iloc[0] != "continue":
                break
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LOOK_COLUMNS)


# --------------------------------------------------------------------------------------------------
# Operating characteristics by simulation


def simulate_design(design: Design, delta: float, sd: float, margin: float, studies: int = 20_000,
                    seed: int = 0, boundaries: pd.DataFrame | None = None) -> dict:
    """Simulate ``studies`` whole sequential studies of one comparison whose paired differences are
    N(``delta``, ``sd``²), with the design's stopping rule (vectorized numpy). Returns the rates of each
    final verdict (``p_different``, ``p_equivalent``, ``p_undecided``), ``p_decided``, the expected and
    90th-percentile seed count at stopping, and the rate of a "different" of the wrong sign.
    ``boundaries``: other boundaries than the design's (a :func:`design_boundaries` table), e.g. to show
    what unadjusted repeated testing does."""
    rng = np.random.default_rng(seed)
    x = rng.normal(delta, sd, size=(studies, design.cap))
    csum, csq = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    table = design_boundaries(design) if boundaries is None else boundaries
    verdict = np.full(studies, "", dtype=object)
    stop_n = np.full(studies, design.cap)
    sign = np.zeros(studies)
    for k, bound in enumerate(table.itertuples()):
        n = bound.n_seeds
        mean = csum[:, n - 1] / n
        var = np.maximum(csq[:, n - 1] - n * mean**2, 0.0) / (n - 1)
        se = np.sqrt(var / n)
        now = _verdict(mean - bound.t_different * se, mean + bound.t_different * se,
                       mean - bound.t_equivalent * se, mean + bound.t_equivalent * se, margin,
                       k == len(table) - 1)
        fresh = (verdict == "") & (now != "continue")
        verdict[fresh], stop_n[fresh], sign[fresh] = now[fresh], n, np.sign(mean[fresh])
    rates = {v: float(np.mean(verdict == v)) for v in ("different", "equivalent", "undecided at cap")}
    wrong_sign = (verdict == "different") & (sign != np.sign(delta)) if delta != 0 else np.zeros(studies, bool)
    return {"delta": delta, "sd": sd, "margin": margin, "studies": studies,
            "p_different": rates["different"], "p_equivalent": rates["equivalent"],
            "p_undecided": rates["undecided at cap"], "p_decided": 1.0 - rates["undecided at cap"],
            "expected_seeds": float(stop_n.mean()), "seeds_p90": float(np.percentile(stop_n, 90)),
            "p_wrong_sign": float(wrong_sign.mean())}


def fixed_design(n_seeds: int, design: Design) -> Design:
    """The fixed-sample design with the same errors: one look at ``n_seeds`` (its boundaries are the
    plain t quantiles)."""
    return Design((n_seeds,), design.alpha_different, design.alpha_equivalent, design.spending, design.rho)
