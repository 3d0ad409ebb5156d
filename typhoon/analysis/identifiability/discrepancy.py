"""Exact masked risks and discrepancies by enumeration, the mode form of the discrepancy, its
second-order factorisation, and the bounds of the theory (see the package docstring).

Every quantity here is computed by summing over all sequences and all visible sets, so it is exact up
to rounding; ``check_factorisation`` computes ``D_π(q_λ)`` by two independent routes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import rel_entr

from typhoon.analysis.identifiability.laws import MixtureLaw, mode_identifying_sets, subset_marginals
from typhoon.masking import Schedule


def _joint_of(law_or_table: MixtureLaw | np.ndarray) -> np.ndarray:
    return law_or_table.joint() if isinstance(law_or_table, MixtureLaw) else np.asarray(law_or_table, dtype=float)


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def conditional_risks_by_visible_count(
    p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per visible count ``v = 0..N-1``: the masked cross-entropy and the conditional KL, directly.

    Returns ``(cross_entropy, kl)`` with ``cross_entropy[v] = E_{S,i} E_p[-log q(x_i | x_S)]`` and
    ``kl[v] = E_{S,i} E_p KL(p(x_i|x_S) ‖ q(x_i|x_S))``, each computed from the predictive conditionals
    ``p(x_{S∪i}) / p(x_S)`` for every visible set ``S`` and every masked ``i`` (no chain rule used).
    """
    p_joint, q_joint = _joint_of(p), _joint_of(q)
    if p_joint.shape != q_joint.shape:
        raise ValueError(f"p and q must be tables of the same shape, got {p_joint.shape} and {q_joint.shape}")
    length = p_joint.ndim
    p_marg = subset_marginals(p_joint, length)
    p_log = {s: _log(t) for s, t in p_marg.items()}
    q_log = {s: _log(t) for s, t in subset_marginals(q_joint, length).items()}
    cross_entropy, kl = np.zeros(length), np.zeros(length)
    for v in range(length):
        total_ce = total_kl = 0.0
        pairs = 0
        for visible in combinations(range(length), v):
            for target in (i for i in range(length) if i not in visible):
                both = tuple(sorted(visible + (target,)))
                axis = both.index(target)
                weight = p_marg[both]
                seen = weight > 0  # elsewhere the logs below may be -inf - (-inf); those terms are unused
                with np.errstate(invalid="ignore"):
                    log_p_cond = p_log[both] - np.expand_dims(p_log[visible], axis)
                    log_q_cond = q_log[both] - np.expand_dims(q_log[visible], axis)
                total_ce -= np.sum(weight[seen] * log_q_cond[seen])
                total_kl += np.sum(weight[seen] * (log_p_cond[seen] - log_q_cond[seen]))
                pairs += 1
        cross_entropy[v], kl[v] = total_ce / pairs, total_kl / pairs
    return cross_entropy, kl


def masked_risk(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray, schedule: Schedule) -> float:
    """``R_π(q) = E_{v~π} E_{S,i} E_p[-log q(x_i | x_S)]`` (nats per predicted coordinate)."""
    cross_entropy, _ = conditional_risks_by_visible_count(p, q)
    return float(schedule.visible_count_pmf(cross_entropy.size)[:-1] @ cross_entropy)


def masked_discrepancy(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray, schedule: Schedule) -> float:
    """``D_π(q) = E_{v~π} E_{S,i} E_p KL(p(x_i|x_S) ‖ q(x_i|x_S)) = R_π(q) - R_π(p)``, computed directly."""
    _, kl = conditional_risks_by_visible_count(p, q)
    return float(schedule.visible_count_pmf(kl.size)[:-1] @ kl)


def total_variation(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray) -> float:
    """``TV(p, q) = ½ Σ_x |p(x) - q(x)|`` of the joint laws."""
    return float(0.5 * np.abs(_joint_of(p) - _joint_of(q)).sum())


def joint_kl(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray) -> float:
    """``KL(p ‖ q)`` of the joint laws."""
    p_joint, q_joint = _joint_of(p), _joint_of(q)
    seen = p_joint > 0
    return float(np.sum(p_joint[seen] * (np.log(p_joint[seen]) - _log(q_joint[seen]))))


def _categorical_kl(a: np.ndarray, b: np.ndarray) -> float:
    seen = a > 0
    return float(np.sum(a[seen] * (np.log(a[seen]) - _log(b[seen]))))


def marginal_kl_by_visible_count(p: MixtureLaw | np.ndarray, q: MixtureLaw | np.ndarray) -> np.ndarray:
    """``k(v) = E_{|T|=v} KL(p(x_T) ‖ q(x_T))`` for ``v = 0..N``; the chain rule says ``d_v = k(v+1) - k(v)``."""
    p_joint, q_joint = _joint_of(p), _joint_of(q)
    length = p_joint.ndim
    p_marg, q_marg = subset_marginals(p_joint, length), subset_marginals(q_joint, length)
    return np.array([
        np.mean([_categorical_kl(p_marg[t].ravel(), q_marg[t].ravel()) for t in combinations(range(length), v)])
        for v in range(length + 1)
    ])


def _mode_posteriors(law: MixtureLaw, subset: tuple[int, ...], weights: np.ndarray):
    """Context probabilities ``p(x_S)`` (flattened, only where > 0) and posteriors ``(M, ·)`` under ``weights``."""
    per_mode = law.mode_subset_marginals[subset].reshape(law.num_modes, -1)
    joint = law.weights[:, None] * per_mode
    context = joint.sum(axis=0)
    seen = context > 0
    posterior = joint[:, seen] / context[seen]
    other = weights[:, None] * per_mode[:, seen]
    return context[seen], posterior, other / other.sum(axis=0)


def check_alternative_weights(law: MixtureLaw, weights: Sequence[float]) -> np.ndarray:
    """The alternative mode weights ``λ`` as an array; ValueError unless ``M`` positive numbers summing to 1."""
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (law.num_modes,) or np.any(weights <= 0) or abs(weights.sum() - 1) > 1e-9:
        raise ValueError(f"alternative mode weights must be {law.num_modes} positive numbers summing to 1, got {weights}")
    return weights


def mode_information_by_visible_count(law: MixtureLaw, alternative: Sequence[float]) -> np.ndarray:
    """``g(v) = E_{|S|=v} E_p KL(p(m | x_S) ‖ q_λ(m | x_S))`` for ``v = 0..N``, from the posteriors only."""
    alternative = check_alternative_weights(law, alternative)
    info = np.zeros(law.length + 1)
    for v in range(law.length + 1):
        subsets = list(combinations(range(law.length), v))
        for subset in subsets:
            context, w, u = _mode_posteriors(law, subset, alternative)
            info[v] += context @ rel_entr(w, u).sum(axis=0) / len(subsets)
    return info


def residual_mode_covariance(law: MixtureLaw) -> np.ndarray:
    """``C(v) = E_{|S|=v} E_p[diag(w) - w wᵀ]``, ``w = p(m | x_S)``: the conditional MMSE matrix of the
    one-hot mode indicator, shape ``(N + 1, M, M)``."""
    cov = np.zeros((law.length + 1, law.num_modes, law.num_modes))
    for v in range(law.length + 1):
        subsets = list(combinations(range(law.length), v))
        for subset in subsets:
            context, w, _ = _mode_posteriors(law, subset, law.weights)
            cov[v] += (np.diag(w @ context) - (w * context) @ w.T) / len(subsets)
    return cov


def residual_mode_uncertainty(law: MixtureLaw) -> np.ndarray:
    """The scalar residual mode uncertainty ``½ E[1 - Σ_m w_m²] = ½ trace C(v)`` for ``v = 0..N``.

    For two modes this is ``mmse(v) = E[w(1-w)]``, the MMSE of the mode indicator given ``v`` visible
    coordinates.
    """
    return 0.5 * np.trace(residual_mode_covariance(law), axis1=1, axis2=2)


def discrepancy_from_mode_information(mode_information: np.ndarray, schedule: Schedule) -> float:
    """The mode form of the masked discrepancy: ``Σ_v π_v [g(v) - g(v+1)]`` (exact for ``q_λ``)."""
    pmf = schedule.visible_count_pmf(mode_information.size - 1)
    return float(pmf[:-1] @ (mode_information[:-1] - mode_information[1:]))


def schedule_sensitivity_matrix(law: MixtureLaw, schedule: Schedule) -> np.ndarray:
    """``M_π = Σ_v π_v [C(v) - C(v+1)]``: the curvature of ``D_π(q_λ)`` in ``θ = log(λ/α)`` at ``θ = 0``."""
    cov = residual_mode_covariance(law)
    pmf = schedule.visible_count_pmf(law.length)
    return np.tensordot(pmf[:-1], cov[:-1] - cov[1:], axes=1)


def second_order_discrepancy(law: MixtureLaw, alternative: Sequence[float], schedule: Schedule) -> float:
    """The factorised approximation ``½ θᵀ M_π θ`` of ``D_π(q_λ)``, ``θ = log(λ / α)``."""
    theta = np.log(check_alternative_weights(law, alternative) / law.weights)
    return float(0.5 * theta @ schedule_sensitivity_matrix(law, schedule) @ theta)


def two_mode_posterior_kl(posterior: np.ndarray, odds_ratio: float) -> np.ndarray:
    """``φ_r(w) = KL(Bern(w) ‖ Bern(u))`` with ``u`` the posterior whose odds are ``r`` times those of ``w``:
    ``w log(w + (1-w)/r) + (1-w) log(1 + w(r-1))``."""
    w = np.asarray(posterior, dtype=float)
    return w * np.log1p((1 - w) * (1 / odds_ratio - 1)) + (1 - w) * np.log1p(w * (odds_ratio - 1))


def odds_ratio(law: MixtureLaw, alternative: Sequence[float]) -> float:
    """``r = (λ_0/λ_1) / (α_0/α_1)`` for a two-mode law."""
    if law.num_modes != 2:
        raise ValueError(f"the odds ratio is defined for two modes, got {law.num_modes}")
    lam = check_alternative_weights(law, alternative)
    return float((lam[0] / lam[1]) / (law.weights[0] / law.weights[1]))


def two_mode_discrepancy_bound(law: MixtureLaw, alternative: Sequence[float], schedule: Schedule) -> float:
    """The exact upper bound ``(r + 1/r - 2) Σ_v π_v mmse(v) ≥ D_π(q_λ)`` (two modes)."""
    r = odds_ratio(law, alternative)
    pmf = schedule.visible_count_pmf(law.length)
    return float((r + 1 / r - 2) * pmf @ residual_mode_uncertainty(law))


def full_mask_weight_error_bound(discrepancy: float, pi0: float) -> float:
    """``sqrt(D / (2 π_0))``: bounds ``max_m |α_m - λ̂_m|`` for any model whose masked discrepancy is ``D``
    under a schedule with full-mask mass ``π_0``, when the modes have disjoint supports."""
    if not 0.0 < pi0 <= 1.0:
        raise ValueError(f"the bound needs full-mask mass pi0 in (0, 1], got pi0={pi0!r}")
    if discrepancy < 0:
        raise ValueError(f"a masked discrepancy is >= 0, got {discrepancy!r}")
    return math.sqrt(discrepancy / (2.0 * pi0))


def fully_masked_mode_weights(law: MixtureLaw, marginals: np.ndarray) -> np.ndarray:
    """``λ̂_m = mean_i q(x_i ∈ A_{m,i})``: mode weights read from fully-masked predicted marginals ``(N, K)``."""
    support = mode_identifying_sets(law)
    return np.einsum("mik,ik->m", support, np.asarray(marginals, dtype=float)) / law.length


def chernoff_information(p0: np.ndarray, p1: np.ndarray) -> float:
    """``-log min_{s∈[0,1]} Σ_k p0(k)^s p1(k)^{1-s}``: the exponential rate at which the mode of a product
    law is revealed by i.i.d. coordinates (the decay rate of ``mmse(v)``)."""
    p0, p1 = np.asarray(p0, dtype=float), np.asarray(p1, dtype=float)
    both = (p0 > 0) & (p1 > 0)
    if not both.any():
        return math.inf
    a, b = np.log(p0[both]), np.log(p1[both])
    result = minimize_scalar(lambda s: np.logaddexp.reduce(s * a + (1 - s) * b), bounds=(0, 1), method="bounded")
    return float(-min(result.fun, 0.0))


@dataclass(frozen=True)
class FactorisationCheck:
    """Both sides of the exact mode-form identity, and the second-order factorisation."""

    direct: float  # Σ_v π_v E KL(p(x_i|x_S) ‖ q_λ(x_i|x_S)), from the predictive conditionals
    mode_form: float  # Σ_v π_v [g(v) - g(v+1)], from the mode posteriors only
    second_order: float  # ½ θᵀ M_π θ
    abs_error: float = field(init=False)
    second_order_ratio: float = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "abs_error", abs(self.direct - self.mode_form))
        ratio = self.direct / self.second_order if self.second_order > 0 else math.nan
        object.__setattr__(self, "second_order_ratio", ratio)


def check_factorisation(law: MixtureLaw, alternative: Sequence[float], schedule: Schedule) -> FactorisationCheck:
    """Compute ``D_π(q_λ)`` directly and through the mode information, and its second-order form."""
    q = law.reweighted(alternative)
    return FactorisationCheck(
        direct=masked_discrepancy(law, q, schedule),
        mode_form=discrepancy_from_mode_information(mode_information_by_visible_count(law, alternative), schedule),
        second_order=second_order_discrepancy(law, alternative, schedule),
    )
