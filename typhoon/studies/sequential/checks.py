"""What stands behind each verdict of a sequential study (:mod:`typhoon.studies.sequential.decisive`), written beside
it in ``stats/verdicts.csv`` (:data:`CHECK_COLUMNS`):

- **Power at the measured sd.** The cap was chosen so that the design decides each comparison with at least
  the registered power at the *planning* sd (pooled over the first 3 seeds). The sd of a comparison's paired
  differences measured on all its seeds can be larger or smaller, and the power with it: ``power_at_cap``
  is the probability that the full design (every look up to the cap, the same boundaries and spending)
  reaches a decision, equivalent or different, when the true difference is 0, at the sd ``power_sd``
  measured on the ``power_sd_seeds`` paired seeds on record (:func:`power_at_cap`). The simulation is the
  design's one, :func:`typhoon.analysis.sequential.simulate_design`, with a fixed seed.
- **Pairs that mix numerics.** A paired difference whose two arms ran on different kernel families (bf16
  products on AMX vs AVX512-BF16 sum in another order: a small difference that is not the strategy's) is
  listed by seed (``mixed_seeds``, ``mixed_kernels``), with the verdict and TOST interval the design gives
  without those seeds (:func:`verdict_without`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from typhoon.analysis import sequential
from typhoon.records import Numerics

# 100,000 studies: a probability to ±0.003 (binomial sd ≤ 0.0016) in about 0.4 s per comparison
POWER_STUDIES = 100_000
POWER_SEED = 1  # the seed of the design's own simulation at difference 0 (decisive_design.design_table)

CHECK_COLUMNS = ["power_sd", "power_sd_seeds", "power_at_cap", "mixed_seeds", "mixed_kernels",
                 "n_seeds_without_mixed", "tost_low_without_mixed", "tost_high_without_mixed", "verdict_without_mixed"]


def power_at_cap(design: sequential.Design, sd: float, margin: float, studies: int | None = None,
                 seed: int = POWER_SEED) -> float:
    """The probability that ``design`` reaches a decision (equivalent or different) by its cap when the paired
    differences are N(0, ``sd``²) and the margin is ``margin``: its whole stopping rule simulated over
    ``studies`` studies (default :data:`POWER_STUDIES`). NaN for an sd that is not a number (fewer than 2 seeds)."""
    if not np.isfinite(sd):
        return float("nan")
    studies = POWER_STUDIES if studies is None else studies
    return sequential.simulate_design(design, 0.0, float(sd), margin, studies, seed)["p_decided"]


def mixed_seeds(pair: tuple[str, str], n_seeds: int,
                numerics: Mapping[tuple[str, int], Numerics | None]) -> dict[int, str]:
    """The seeds among 0..``n_seeds`` − 1 whose two arms (``pair``) mix numerics (:meth:`Numerics.mixes_with`:
    precision, device or kernel family), each with what it pairs (``"typhoon_task bf16 on cpu (avx512_bf16)
    vs random bf16 on cpu (amx)"``). ``numerics``: (strategy, seed) -> the numerics of that arm's record."""
    first, second = pair
    out = {}
    for seed in range(n_seeds):
        a, b = numerics.get((first, seed)), numerics.get((second, seed))
        if a is not None and b is not None and a.mixes_with(b):
            out[seed] = f"{first} {a.kernel_label} vs {second} {b.kernel_label}"
    return out


def verdict_without(values: Sequence[float], drop: Sequence[int], design: sequential.Design,
                    margin: float) -> dict:
    """The design's verdict on the paired differences ``values`` (seed order) without the seeds in ``drop``:
    those left, in seed order, analysed look by look and stopped at the first decision
    (:func:`sequential.analyse_history`). When ``values`` reach the cap, the seeds left are all the comparison
    will have: the design's looks below their count and a last look at it that spends what is left of the
    error (Lan & DeMets' rule for a study that ends with less information than planned; each look's
    information fraction is then its seeds over the seeds left). Otherwise the design's own looks, and
    ``continue`` when the seeds left decide nothing yet. Returns the ``*_without_mixed`` columns."""
    dropped = set(drop)
    left = [float(v) for seed, v in enumerate(values) if seed not in dropped]
    final = len(values) >= design.cap
    if final and len(left) < design.cap:
        looks = tuple(n for n in design.looks if n < len(left)) + (len(left),)
        design = sequential.Design(looks, design.alpha_different, design.alpha_equivalent, design.spending, design.rho)
    history = (sequential.analyse_history({"left": left}, design, {"left": margin}) if len(left) >= 2
               else None)
    if history is None or history.empty:
        return {"n_seeds_without_mixed": len(left), "tost_low_without_mixed": np.nan,
                "tost_high_without_mixed": np.nan, "verdict_without_mixed": "undecided at cap" if final else "continue"}
    last = history.iloc[-1]
    return {"n_seeds_without_mixed": int(last["n_seeds"]), "tost_low_without_mixed": float(last["tost_low"]),
            "tost_high_without_mixed": float(last["tost_high"]), "verdict_without_mixed": str(last["verdict"])}


def comparison_checks(values: Sequence[float], pair: tuple[str, str], design: sequential.Design, margin: float,
                      numerics: Mapping[tuple[str, int], Numerics | None], studies: int | None = None) -> dict:
    """The :data:`CHECK_COLUMNS` of one comparison, from all its paired differences on record ``values``
    (seed order, up to the cap) and the numerics of its arms' records (:func:`mixed_seeds`): the power at the
    sd they measure, and, where some pairs mix numerics, which, and the verdict without them."""
    values = np.asarray(values, float)
    sd = float(values.std(ddof=1)) if len(values) >= 2 else float("nan")
    row = {"power_sd": sd, "power_sd_seeds": len(values), "power_at_cap": power_at_cap(design, sd, margin, studies)}
    mixed = mixed_seeds(pair, len(values), numerics)
    row["mixed_seeds"] = " ".join(map(str, mixed)) or None
    row["mixed_kernels"] = "; ".join(dict.fromkeys(mixed.values())) or None
    if mixed:
        row.update(verdict_without(values, list(mixed), design, margin))
    return {c: row.get(c) for c in CHECK_COLUMNS}
