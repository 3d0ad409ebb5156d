"""The budget-spread bottleneck: how much of Typhoon's saliency ranking survives calibration.

Typhoon turns per-type saliency weights w into masking probabilities pi by min-max normalising w into
a band [1 - delta, 1] and scaling to the budget p (``typhoon.masking.calibration``). With heavy-tailed
w a few outliers take the top of the band and squash everybody else to its bottom, and even a perfectly
spread band only moves pi within [(1-delta), 1] x const: the masked-token distribution stays close to
uniform masking. This module measures that, from saved masking states (no retraining):

- :func:`find_masking_states` -- locate ``masking_state.npz`` of typhoon runs through ``results.csv``;
- :func:`state_metrics` / :func:`summarize_states` -- KL to uniform (nats/token) next to the paper's
  value, budget moved (TV between the masked distribution q and uniform u), spread of pi, squashing;
- :func:`calibration_sweep` -- the same diagnostics over delta in [0, 1] and calibrations ``minmax``,
  ``rank``, ``softmax(tau)`` on fixed weights;
- :func:`synthetic_state` -- a state with known heavy-tailed (Pareto) weights and Zipf counts;
- :func:`bottleneck_conclusion` -- the written conclusion, built from the computed tables;
- :func:`typhoon.analysis.bottleneck_verdict.bottleneck_verdict` -- from the *runs* (``results.csv``): does moving more of the budget help?
  Per typhoon-family strategy vs random: the budget it actually moved, the dev-metric difference with its
  CI, paired t with Holm, TOST, seeds needed, and one sentence.

All calibration maths is imported from ``typhoon.masking`` (never re-implemented here).
"""


from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as st

from typhoon.analysis.run_summary import arms
from typhoon.masking import (
    CALIBRATIONS,
    budget_moved,
    calibrate,
    kl_to_uniform,
    load_state,
    masked_distribution_kl,
    spread,
)
from typhoon.records import RUN_KEYS

__all__ = [
    "PAPER_KL_NATS_PER_TOKEN",
    "DEFAULT_DELTAS",
    "DEFAULT_TAUS",
    "find_masking_states",
    "load_masking_state",
    "state_metrics",
    "summarize_states",
    "calibration_sweep",
    "sweep_states",
    "synthetic_state",
    "representative_state",
    "analysis_source",
    "bottleneck_conclusion",
]


# The paper reports that its calibrated masking distribution is only about 7e-4 nats per token away
# (KL) from uniform random masking at the same budget -- the "budget-spread bottleneck".
PAPER_KL_NATS_PER_TOKEN = 7e-4


DEFAULT_DELTAS: tuple[float, ...] = tuple(float(x) for x in np.round(np.linspace(0.0, 1.0, 11), 2))


DEFAULT_TAUS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)


# --------------------------------------------------------------------------------------------------
# finding and loading states
# --------------------------------------------------------------------------------------------------
def find_masking_states(results: pd.DataFrame | str | os.PathLike, out_dir: str | os.PathLike,
                        prefix: str = "typhoon") -> pd.DataFrame:
    """Runs whose strategy starts with ``prefix`` and ``status == "ok"``, with the path of their
    ``<out_dir>/<record_path>/masking_state.npz`` and whether it exists (``exists``).

    ``results`` is the results table or the path of ``results.csv`` (a missing file gives an empty
    table whose ``.attrs["note"]`` says so)."""
    if not isinstance(results, pd.DataFrame):
        path = Path(results)
        if not path.is_file():
            empty = pd.DataFrame(columns=[*RUN_KEYS, "record_path", "path", "exists"])
            empty.attrs["note"] = f"no results table at {path}"
            return empty
        results = pd.read_csv(path)
    need = [*RUN_KEYS, "status", "record_path"]
    missing = [c for c in need if c not in results.columns]
    if missing:
        raise ValueError(f"results is missing column(s) {missing}")
    results = arms(results)  # a state is keyed by its arm (strategy+schedule), as the statistics name it
    df = results[(results["status"].astype(str) == "ok")
                 & results["strategy"].astype(str).str.startswith(prefix)]
    rows = []
    for r in df.itertuples():
        path = Path(out_dir) / str(r.record_path) / "masking_state.npz"
        rows.append(dict(task=str(r.task), backbone=str(r.backbone), strategy=str(r.strategy), seed=r.seed,
                         record_path=str(r.record_path), path=str(path), exists=path.is_file()))
    return pd.DataFrame(rows, columns=[*RUN_KEYS, "record_path", "path", "exists"])


def load_masking_state(path: str | os.PathLike) -> dict[str, Any]:
    """``typhoon.masking.load_state`` plus checks: equal-length 1-D arrays, a budget ``p`` in meta."""
    state = load_state(path)
    missing = [k for k in ("weights", "counts", "seen", "probs") if k not in state]
    if missing:
        raise ValueError(f"{path}: masking state lacks array(s) {missing}")
    n = {k: np.asarray(state[k]).shape for k in ("weights", "counts", "seen", "probs")}
    if len(set(n.values())) != 1 or len(next(iter(n.values()))) != 1:
        raise ValueError(f"{path}: arrays must be 1-D of one length, got shapes {n}")
    if "p" not in state["meta"]:
        raise ValueError(f"{path}: meta has no budget 'p'")
    return state


# --------------------------------------------------------------------------------------------------
# diagnostics of one state
# --------------------------------------------------------------------------------------------------
def _metrics(weights, counts, probs, seen, p) -> dict[str, float]:
    """Diagnostics of probabilities ``probs`` (all from typhoon.masking.calibration)."""
    sp = spread(probs, seen)
    pis = np.asarray(probs, dtype=float)[seen]
    f = np.asarray(counts, dtype=float)
    out = dict(
        kl_to_uniform=kl_to_uniform(probs, counts, p),
        kl_to_uniform_seen=kl_to_uniform(probs, counts, p, seen=seen) if f[seen].sum() > 0 else math.nan,
        masked_kl=masked_distribution_kl(probs, counts),
        budget_moved=budget_moved(probs, counts),
        pi_min=sp["min"], pi_max=sp["max"], pi_ratio=sp["ratio"],
        pi_p90_p10=(float(np.quantile(pis, 0.9) / np.quantile(pis, 0.1))
                    if pis.size and np.quantile(pis, 0.1) > 0 else math.nan),
        share_capped=float((f * (np.asarray(probs) >= 1.0)).sum() / f.sum()),
    )
    w = np.asarray(weights, dtype=float)[seen]
    pis_w = pis[np.isfinite(w)]
    w = w[np.isfinite(w)]
    out["spearman_w_pi"] = (float(st.spearmanr(w, pis_w).statistic)
                            if w.size > 2 and np.ptp(w) > 0 and np.ptp(pis_w) > 0 else math.nan)
    return out


def _squash(weights, seen) -> dict[str, float]:
    """Where the seen types sit in the min-max band: median and share below 0.1 of z = (w-min)/(max-min)."""
    w = np.asarray(weights, dtype=float)[seen]
    w = w[np.isfinite(w)]
    if w.size < 2 or np.ptp(w) == 0:
        return dict(median_z=math.nan, share_z_below_0_1=math.nan, w_max_over_p99=math.nan)
    z = (w - w.min()) / np.ptp(w)
    q99 = np.quantile(w - w.min(), 0.99)
    return dict(median_z=float(np.median(z)), share_z_below_0_1=float(np.mean(z < 0.1)),
                w_max_over_p99=float((w.max() - w.min()) / q99) if q99 > 0 else math.inf)


def state_metrics(state: Mapping[str, Any]) -> dict[str, Any]:
    """Diagnostics of a saved masking state (``load_masking_state``): budget ``p``, calibration,
    ``n_types``, ``n_seen``, ``kl_to_uniform`` (nats/token over all types, as logged in training) and
    over seen types only, ``kl_vs_paper`` (ratio to :data:`PAPER_KL_NATS_PER_TOKEN`), ``masked_kl``
    (KL(q||u), nats), ``budget_moved`` (TV(q, u)), pi min/max/ratio, the p90/p10 ratio of pi over seen
    types, Spearman(w, pi), and squashing: ``median_z`` / ``share_z_below_0_1`` of the min-max
    normalised weights (near 0 = most types crowd at the bottom of the band)."""
    meta = state.get("meta", {})
    meta = json.loads(meta) if isinstance(meta, str) else dict(meta)
    counts = np.asarray(state["counts"])
    if counts.size == 0:
        raise ValueError("masking state is empty (the strategy was never prepared with corpus counts)")
    seen = np.asarray(state["seen"], dtype=bool)
    weights = np.asarray(state["weights"], dtype=float)
    probs = np.asarray(state["probs"], dtype=float)
    p = float(meta["p"])
    out: dict[str, Any] = dict(p=p, calibration=meta.get("calibration", "minmax"),
                               delta=float(meta.get("delta", math.nan)), tau=float(meta.get("tau", math.nan)),
                               steps=meta.get("steps"), n_types=int(counts.size), n_seen=int(seen.sum()),
                               seen_token_share=float(counts[seen].sum() / counts.sum()))
    out.update(_metrics(weights, counts, probs, seen, p))
    out["paper_kl"] = PAPER_KL_NATS_PER_TOKEN
    out["kl_vs_paper"] = out["kl_to_uniform"] / PAPER_KL_NATS_PER_TOKEN
    out.update(_squash(weights, seen))
    return out


def summarize_states(found: pd.DataFrame) -> pd.DataFrame:
    """One row of :func:`state_metrics` per existing state in ``find_masking_states(...)``."""
    rows = []
    for r in found[found["exists"]].itertuples():
        m = state_metrics(load_masking_state(r.path))
        rows.append({**{k: getattr(r, k) for k in RUN_KEYS}, **m})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# sweeps (no retraining)
# --------------------------------------------------------------------------------------------------
def calibration_sweep(weights, counts, p: float, seen=None, deltas: Iterable[float] = DEFAULT_DELTAS,
                      methods: Iterable[str] = CALIBRATIONS, taus: Iterable[float] = DEFAULT_TAUS) -> pd.DataFrame:
    """Recalibrate fixed weights for every (method, delta[, tau]) and measure the result.

    ``minmax`` and ``rank`` are swept over ``deltas`` (tau = NaN); ``softmax`` does not use delta and is
    computed once per tau (delta = NaN). Columns: method, delta, tau, kl_to_uniform (nats/token),
    kl_to_uniform_seen, masked_kl, budget_moved, pi_min, pi_max, pi_ratio, pi_p90_p10, share_capped,
    spearman_w_pi.
    """
    weights = np.asarray(weights, dtype=float)
    counts = np.asarray(counts)
    seen = ~np.isnan(weights) if seen is None else np.asarray(seen, dtype=bool) & ~np.isnan(weights)
    methods = list(methods)
    bad = [m for m in methods if m not in CALIBRATIONS]
    if bad:
        raise ValueError(f"unknown calibration(s) {bad}; choose from {list(CALIBRATIONS)}")
    deltas = [float(d) for d in deltas]
    if any(not (0.0 <= d <= 1.0) for d in deltas):
        raise ValueError(f"deltas must lie in [0, 1], got {deltas}")
    rows = []
    for method in methods:
        grid = [(math.nan, float(t)) for t in taus] if method == "softmax" else [(d, math.nan) for d in deltas]
        for delta, tau in grid:
            probs = calibrate(weights, counts, p, method=method, delta=0.0 if math.isnan(delta) else delta,
                              tau=1.0 if math.isnan(tau) else tau, seen=seen)
            rows.append(dict(method=method, delta=delta, tau=tau, **_metrics(weights, counts, probs, seen, p)))
    return pd.DataFrame(rows)


def sweep_states(found: pd.DataFrame, **kwargs) -> pd.DataFrame:
    """:func:`calibration_sweep` on every existing state of ``find_masking_states(...)``, keyed by run."""
    frames = []
    for r in found[found["exists"]].itertuples():
        s = load_masking_state(r.path)
        sw = calibration_sweep(s["weights"], s["counts"], float(s["meta"]["p"]), seen=s["seen"], **kwargs)
        for k in reversed(RUN_KEYS):
            sw.insert(0, k, getattr(r, k))
        frames.append(sw)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def representative_state(summary: pd.DataFrame, found: pd.DataFrame) -> pd.Series | None:
    """The row of ``found`` whose state has the median ``kl_to_uniform`` (None if there is none)."""
    if summary is None or summary.empty:
        return None
    order = summary["kl_to_uniform"].rank(method="first")
    pick = summary.loc[(order - (len(summary) + 1) / 2).abs().idxmin()]
    m = np.ones(len(found), dtype=bool)
    for k in RUN_KEYS:
        m &= (found[k].astype(str) == str(pick[k])).to_numpy()
    return found[m].iloc[0]


def analysis_source(found: pd.DataFrame, states: pd.DataFrame,
                    synthetic: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """The state to sweep and plot: the saved state with the median KL, else ``synthetic`` (built with
    :func:`synthetic_state` defaults when None). Returns ``(label, state)``."""
    rep = representative_state(states, found)
    if rep is None:
        return "synthetic heavy-tailed weights", dict(synthetic if synthetic is not None else synthetic_state())
    label = f"{rep['task']}/{rep['backbone']}/{rep['strategy']}/seed {rep['seed']}"
    return label, load_masking_state(rep["path"])


# --------------------------------------------------------------------------------------------------
# synthetic
# --------------------------------------------------------------------------------------------------
def synthetic_state(n_types: int = 5000, tail: float = 1.1, zipf_s: float = 1.0, n_tokens: int = 2_000_000,
                    p: float = 0.15, delta: float = 0.4, method: str = "minmax", tau: float = 1.0,
                    unseen_share: float = 0.0, seed: int = 0) -> dict[str, Any]:
    """A masking state with known heavy-tailed weights, in the layout of ``masking_state.npz``.

    Weights are Pareto(``tail``) (scale 1; smaller tail = heavier), counts follow Zipf(``zipf_s``) over
    types scaled to about ``n_tokens`` (at least 1 each), the rarest ``unseen_share`` of types are unseen
    (NaN weight), and probs come from ``typhoon.masking.calibrate``.
    """
    if n_types < 2:
        raise ValueError("n_types must be >= 2")
    rng = np.random.default_rng(seed)
    weights = (rng.pareto(tail, n_types) + 1.0).astype(float)
    ranks = np.arange(1, n_types + 1, dtype=float)
    freq = ranks ** -zipf_s
    counts = np.maximum(1, np.round(freq / freq.sum() * n_tokens)).astype(np.int64)
    seen = np.ones(n_types, dtype=bool)
    n_unseen = int(round(unseen_share * n_types))
    if n_unseen:
        seen[-n_unseen:] = False
    weights[~seen] = np.nan
    probs = calibrate(weights, counts, p, method=method, delta=delta, tau=tau, seen=seen)
    meta = dict(name="synthetic", p=p, delta=delta, calibration=method, tau=tau, steps=0, tail=tail,
                zipf_s=zipf_s, seed=seed, kl_to_uniform=kl_to_uniform(probs, counts, p))
    return dict(weights=weights, counts=counts, seen=seen, probs=probs, meta=meta)


# --------------------------------------------------------------------------------------------------
# conclusion
# --------------------------------------------------------------------------------------------------
def _at(sweep: pd.DataFrame, method: str, delta: float | None = None, tau: float | None = None) -> pd.Series | None:
    m = sweep["method"] == method
    if delta is not None:
        m &= np.isclose(sweep["delta"].astype(float), delta)
    if tau is not None:
        m &= np.isclose(sweep["tau"].astype(float), tau)
    sub = sweep[m]
    return None if sub.empty else sub.iloc[0]


def bottleneck_conclusion(states: pd.DataFrame | None, sweep: pd.DataFrame, source: str,
                          delta: float | None = None, paper_kl: float | None = PAPER_KL_NATS_PER_TOKEN) -> str:
    """Markdown conclusion whose numbers all come from ``states`` (``summarize_states``; may be empty)
    and ``sweep`` (``calibration_sweep`` of the state named by ``source``). ``paper_kl`` None: the saved
    states are not set beside the paper's KL (a pipeline check's tiny model says nothing about it)."""
    need = ["method", "delta", "tau", "kl_to_uniform", "budget_moved", "pi_ratio"]
    missing = [c for c in need if c not in sweep.columns]
    if missing or sweep.empty:
        raise ValueError(f"sweep is empty or lacks column(s) {missing}")
    lines = []
    if states is not None and not states.empty:
        kl = states["kl_to_uniform"]
        versus = f", {kl.median() / paper_kl:.2g}x the paper's ~{paper_kl:.0e}" if paper_kl else ""
        lines.append(
            f"- **Saved Typhoon states ({len(states)}):** KL to uniform masking is "
            f"{kl.median():.2e} nats/token (median; range {kl.min():.2e}-{kl.max():.2e}){versus}. Median budget moved "
            f"(TV(q, u)) {states['budget_moved'].median():.2%}; pi spans a max/min ratio of "
            f"{states['pi_ratio'].median():.3g} (median).")
        if states["median_z"].notna().any():
            lines.append(
                f"- **Squashing:** the median seen type sits at z = {states['median_z'].median():.3f} of the "
                f"min-max range, and {states['share_z_below_0_1'].median():.1%} of types lie in its bottom "
                f"tenth, so they share nearly the same pi at the bottom of the band.")
    else:
        lines.append("- **No saved Typhoon masking states were found**; the numbers below are for a "
                     "synthetic heavy-tailed state.")
    if delta is None or not np.isfinite(delta):
        deltas = sweep.loc[sweep["method"] == "minmax", "delta"].dropna()
        delta = 0.4 if np.isclose(deltas, 0.4).any() else (float(deltas.iloc[len(deltas) // 2])
                                                            if len(deltas) else math.nan)
    mm = _at(sweep, "minmax", delta)
    rk = _at(sweep, "rank", delta)
    mm1 = _at(sweep, "minmax", 1.0)
    sm = sweep[sweep["method"] == "softmax"]
    if mm is not None:
        txt = (f"- **Sweep on {source}, delta = {delta:g}:** min-max gives KL {mm.kl_to_uniform:.2e} "
               f"nats/token and moves {mm.budget_moved:.2%} of the budget (max/min pi {mm.pi_ratio:.3g}, "
               f"p90/p10 {mm.pi_p90_p10:.4g})")
        if rk is not None:
            rel = (f" ({rk.kl_to_uniform / mm.kl_to_uniform:.3g}x)" if mm.kl_to_uniform > 0 else "")
            txt += (f"; rank calibration in the same band gives KL {rk.kl_to_uniform:.2e}{rel}, moves "
                    f"{rk.budget_moved:.2%} (p90/p10 {rk.pi_p90_p10:.4g})")
        lines.append(txt + ".")
    if mm1 is not None and delta != 1.0:
        lines.append(f"- **No floor (delta = 1):** min-max gives KL {mm1.kl_to_uniform:.2e} nats/token and moves "
                     f"{mm1.budget_moved:.2%} of the budget; {mm1.share_capped:.2%} of tokens get pi = 1 and "
                     f"the least salient types pi = {mm1.pi_min:.3g}.")
    if not sm.empty:
        parts = "; ".join(f"tau = {r.tau:g}: KL {r.kl_to_uniform:.2e}, moved {r.budget_moved:.1%}, "
                          f"{r.share_capped:.1%} of tokens capped at pi = 1" for r in sm.itertuples())
        lines.append(f"- **Softmax of standardised weights** (no band): {parts}.")
    if mm is not None and rk is not None:
        if mm.budget_moved < rk.budget_moved:
            lines.append(
                f"- **Bottleneck:** min-max keeps the order of the weights but "
                f"moves {mm.budget_moved / rk.budget_moved:.2g} of what rank calibration moves within the same "
                f"band [1 - delta, 1] = [{1 - delta:g}, 1]: the masked-token distribution overlaps "
                f"{1 - mm.budget_moved:.2%} with that of uniform masking.")
        else:
            lines.append(
                f"- min-max does not squash these weights relative to rank calibration at delta = {delta:g} "
                f"(it moves {mm.budget_moved:.2%} vs {rk.budget_moved:.2%}).")
    return "\n".join(lines)
