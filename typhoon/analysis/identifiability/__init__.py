r"""Mode blindness of masked prediction, and how low-visibility mask schedules cure it.

Masked prediction does not fit the joint law ``p`` of a sequence ``x ∈ [K]^N``; it fits the family of
conditionals ``p(x_i | x_S)`` that the mask schedule asks about. This package makes that precise for
mixtures of well-separated "modes" (think code vs prose) and checks it exactly, by enumeration. The
schedules are training's own (``typhoon.masking.schedules``).

Modules
-------
* ``laws``: product and Markov modes, their mixtures over ``[K]^N``, exact enumeration.
* ``discrepancy``: masked risks and discrepancies, mode information, the factorisation and the bounds.
* ``fits``: exponential vs power-law fits on log scales.
* ``training``: a masked predictor trained by gradient descent, and the mode weight it recovers.
* ``text``: residual code-vs-prose uncertainty on real text.
* ``experiments``: the notebook's three experiments, from ``StudySettings`` to tables.
* ``figures``, ``conclusions``: the notebook's figures and its Markdown conclusions.

Setting
-------
* A **schedule** (``typhoon.masking.schedules.Schedule``) is a law ``π`` on the number ``v ∈ {0, …, N-1}`` of
  visible coordinates. Given ``v``, the visible set ``S`` is uniform among the sets of size ``v`` and
  the predicted coordinate ``i`` is uniform among the ``N - v`` masked ones.
* The **masked-prediction risk** of a model law ``q`` is
  ``R_π(q) = E_{v~π} E_{S,|S|=v} E_{i∉S} E_p[-log q(x_i | x_S)]`` and its **masked discrepancy** (excess
  risk) is ``D_π(q) = R_π(q) - R_π(p) = Σ_v π_v d_v(q)`` with
  ``d_v(q) = E_{S,i} E_p KL(p(x_i|x_S) ‖ q(x_i|x_S))``.
* The truth is a mixture ``p = Σ_m α_m p_m`` of modes (each a product or a Markov law), and the
  **reweighted family** is ``q_λ = Σ_m λ_m p_m``: same within-mode laws, other mode weights.
  Write ``w(x_S) = p(m | x_S)`` and ``u(x_S) = q_λ(m | x_S) ∝ (λ_m / α_m) w_m(x_S)`` for the two
  posteriors over modes and ``θ = log(λ / α)`` (entrywise).

Exact identities (checked to 1e-10 in the tests)
------------------------------------------------
1. *Chain rule.* For any ``q``: ``d_v(q) = k(v+1) - k(v)`` with ``k(v) = E_{|T|=v} KL(p(x_T) ‖ q(x_T))``,
   because a uniform ``S`` of size ``v`` plus a uniform ``i ∉ S`` is a uniform ``T`` of size ``v+1``.
   Hence the uniform masking ratio (masked-diffusion) schedule has ``D_π(q) = KL(p ‖ q) / N``.
2. *Mode form.* For ``q = q_λ``, ``k(v) = KL(α ‖ λ) - g(v)`` where
   ``g(v) = E_{|S|=v} E_p KL(w(x_S) ‖ u(x_S))`` is the information about the mode weights that is still
   available after seeing ``v`` coordinates. So, exactly,

       D_π(q_λ) = Σ_v π_v [g(v) - g(v+1)],      g(0) = KL(α ‖ λ),  g(N) = KL(α‖λ) - KL(p ‖ q_λ).

   ``check_factorisation`` computes the left side from the predictive conditionals and the right side
   from the mode posteriors only, two independent routes through the numbers.
3. *Two modes, closed form.* With posterior ``w = p(m=0 | x_S)`` and odds ratio
   ``r = (λ_0/λ_1) / (α_0/α_1)``, ``KL(w ‖ u) = φ_r(w) = w log(w + (1-w)/r) + (1-w) log(1 + w(r-1))``,
   and ``φ_r(w) ≤ (r + 1/r - 2) · w(1-w)`` (from ``log(1+a) ≤ a``).

The factorisation (second order, checked as a ratio → 1 when λ → α)
-------------------------------------------------------------------
Let ``C(v) = E_{|S|=v} E_p[Cov(e_m | x_S)] = E[diag(w) - w wᵀ]`` be the conditional MMSE matrix of the
one-hot mode indicator given ``v`` visible coordinates (the *residual mode uncertainty*; for two modes
its scalar version is ``mmse(v) = E[w(1-w)]``). ``C(v)`` is non-increasing in ``v``. Then

    D_π(q_λ) = ½ θᵀ M_π θ + O(|θ|³),      M_π = Σ_v π_v [C(v) - C(v+1)],

which for two modes reads ``D_π(q_λ) = ½ (log r)² · Σ_v π_v [mmse(v) - mmse(v+1)] + O(|log r|³)``:
an information term in the mode weights (``½ (log r)² ≈ KL(α‖λ) / (α_0 α_1)``) times the
schedule-averaged drop of residual mode uncertainty. Exactly (all orders, two modes),

    D_π(q_λ) ≤ Σ_v π_v g(v) ≤ (r + 1/r - 2) Σ_v π_v mmse(v) ≤ (r + 1/r - 2) mmse(v_min),

and for product modes ``mmse(v) ≤ ½ sqrt(α_0 α_1) · E_{|S|=v} Π_{j∈S} BC_j`` (``BC_j`` the Bhattacharyya
coefficient of the two modes at coordinate ``j``), so a schedule whose smallest visible set is ``v_min``
sees a macroscopic reweighting (``TV(p, q_λ) = |α_0 - λ_0| · TV(p_0, p_1)``) only through a term that is
exponentially small in ``v_min`` ("mode blindness"); for identically distributed coordinates the rate is
the Chernoff information of the two per-coordinate laws (``chernoff_information``).

Restoring sensitivity
---------------------
Every term of ``D_π`` is ≥ 0, so for *any* model ``q`` the full-mask mass gives
``D_π(q) ≥ π_0 · mean_i KL(p(x_i) ‖ q(x_i))``. When the modes have disjoint supports per coordinate
(``A_{m,i}``), ``|α_m - q(x_i ∈ A_{m,i})| ≤ TV(p(x_i), q(x_i))`` and Pinsker give

    max_m |α_m - λ̂_m| ≤ sqrt(D_π(q) / (2 π_0)),      λ̂_m = mean_i q(x_i ∈ A_{m,i}),

the mode weight read from the model's fully-masked prediction. Mass ``π_s`` on visible size ``s`` gives,
to second order, ``|θ| ≲ sqrt(2 D / (π_s [mmse(s) - mmse(s+1)]))``.

Experiments (tidy DataFrames)
-----------------------------
(a) ``discrepancy_vs_min_visible`` (run by ``discrepancy_study``): ``D_π(q_λ)`` against ``v_min`` for blind
    schedules; exponential decay (``fit_exponential_decay``) while ``TV(p, q_λ)`` stays put.
(b) ``train_mode_weight_recovery`` (run by ``recovery_study``): a mixture-of-products masked predictor
    trained by gradient descent under a blind schedule and under ``with_full_mask(blind, π_0)``; the
    recovered mode weight misses under the blind one, and its error falls like ``π_0^{-1/2}``
    (``fit_power_law``).
(c) ``text_mode_uncertainty`` (run by ``text_study``): residual code-vs-prose uncertainty given ``v``
    visible characters of real text (Python standard library vs CoLA sentences), with exponential and
    power-law fits compared (``compare_decay_fits``).
"""

from __future__ import annotations

from typhoon.analysis.identifiability.conclusions import (
    FitComparison,
    compare_fits,
    discrepancy_conclusion,
    recovery_conclusion,
    text_conclusion,
)
from typhoon.analysis.identifiability.discrepancy import (
    FactorisationCheck,
    check_alternative_weights,
    check_factorisation,
    chernoff_information,
    conditional_risks_by_visible_count,
    discrepancy_from_mode_information,
    full_mask_weight_error_bound,
    fully_masked_mode_weights,
    joint_kl,
    marginal_kl_by_visible_count,
    masked_discrepancy,
    masked_risk,
    mode_information_by_visible_count,
    odds_ratio,
    residual_mode_covariance,
    residual_mode_uncertainty,
    schedule_sensitivity_matrix,
    second_order_discrepancy,
    total_variation,
    two_mode_discrepancy_bound,
    two_mode_posterior_kl,
)
from typhoon.analysis.identifiability.experiments import (
    DiscrepancyStudy,
    RecoveryStudy,
    StudySettings,
    TextStudy,
    blind_schedules,
    decay_rates,
    discrepancy_study,
    discrepancy_vs_min_visible,
    identity_checks,
    range_label,
    recovery_study,
    split_weights,
    study_settings,
    text_decay_fits,
    text_study,
    write_tables,
)
from typhoon.analysis.identifiability.figures import (
    plot_discrepancy_decay,
    plot_mode_weight_recovery,
    plot_text_uncertainty,
)
from typhoon.analysis.identifiability.fits import compare_decay_fits, fit_exponential_decay, fit_power_law
from typhoon.analysis.identifiability.laws import (
    MAX_ENUMERATED_SEQUENCES,
    MarkovMode,
    MixtureLaw,
    Mode,
    ProductMode,
    mode_identifying_sets,
    separated_product_law,
    subset_marginals,
)
from typhoon.analysis.identifiability.text import (
    cumulative_log_odds,
    fit_platt,
    load_code_texts,
    load_prose_sentences,
    random_windows,
    text_bytes,
    text_mode_uncertainty,
    unigram_log_probs,
)
from typhoon.analysis.identifiability.training import (
    MixtureOfProductsPredictor,
    TrainingSets,
    draw_training_sets,
    fit_masked_predictors,
    recovery_error_summary,
    train_mode_weight_recovery,
)

__all__ = [
    "DiscrepancyStudy",
    "FactorisationCheck",
    "FitComparison",
    "MAX_ENUMERATED_SEQUENCES",
    "MarkovMode",
    "MixtureLaw",
    "MixtureOfProductsPredictor",
    "Mode",
    "ProductMode",
    "RecoveryStudy",
    "StudySettings",
    "TextStudy",
    "TrainingSets",
    "blind_schedules",
    "check_alternative_weights",
    "check_factorisation",
    "chernoff_information",
    "compare_decay_fits",
    "compare_fits",
    "conditional_risks_by_visible_count",
    "cumulative_log_odds",
    "decay_rates",
    "discrepancy_conclusion",
    "discrepancy_from_mode_information",
    "discrepancy_study",
    "discrepancy_vs_min_visible",
    "draw_training_sets",
    "fit_exponential_decay",
    "fit_masked_predictors",
    "fit_platt",
    "fit_power_law",
    "full_mask_weight_error_bound",
    "fully_masked_mode_weights",
    "identity_checks",
    "joint_kl",
    "load_code_texts",
    "load_prose_sentences",
    "marginal_kl_by_visible_count",
    "masked_discrepancy",
    "masked_risk",
    "mode_identifying_sets",
    "mode_information_by_visible_count",
    "odds_ratio",
    "plot_discrepancy_decay",
    "plot_mode_weight_recovery",
    "plot_text_uncertainty",
    "random_windows",
    "range_label",
    "recovery_conclusion",
    "recovery_error_summary",
    "recovery_study",
    "residual_mode_covariance",
    "residual_mode_uncertainty",
    "schedule_sensitivity_matrix",
    "second_order_discrepancy",
    "separated_product_law",
    "split_weights",
    "study_settings",
    "subset_marginals",
    "text_bytes",
    "text_conclusion",
    "text_decay_fits",
    "text_mode_uncertainty",
    "text_study",
    "total_variation",
    "train_mode_weight_recovery",
    "two_mode_discrepancy_bound",
    "two_mode_posterior_kl",
    "unigram_log_probs",
    "write_tables",
]
