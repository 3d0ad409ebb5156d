"""Experiment (b): a masked predictor trained by gradient descent, and the mode weight it recovers.

The model is a mixture of product modes whose posterior over modes given the visible symbols is exact
Bayes; many independent replicas (one per seed and schedule) train at once. Under a blind schedule its
masked loss is flat in the mode weights; full-mask mass ``π_0`` pins them down (see the package
docstring for the bound ``|α_0 - λ̂_0| ≤ sqrt(D_π(q̂) / (2 π_0))``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from typhoon import machine
from typhoon.analysis.identifiability.discrepancy import (
    full_mask_weight_error_bound,
    fully_masked_mode_weights,
    masked_discrepancy,
)
from typhoon.analysis.identifiability.laws import MixtureLaw, ProductMode, mode_identifying_sets
from typhoon.masking import Schedule, sample_visible_sets


class MixtureOfProductsPredictor(torch.nn.Module):
    """``R`` independent replicas of a masked predictor ``q(x_i | x_S) = Σ_m q(m | x_S) q_m(x_i)``.

    Each replica has mode logits (``R, M``) and per-mode, per-coordinate symbol logits (``R, M, N, K``);
    its posterior over modes given the visible symbols is exact Bayes inside the model. The replicas
    share nothing: summing their losses and stepping Adam (elementwise) trains each on its own.
    """

    def __init__(self, replicas: int, num_modes: int, length: int, num_symbols: int, generator: torch.Generator):
        super().__init__()
        self.mode_logits = torch.nn.Parameter(torch.zeros(replicas, num_modes))
        self.symbol_logits = torch.nn.Parameter(
            0.5 * torch.randn(replicas, num_modes, length, num_symbols, generator=generator)
        )

    def per_mode_log_likelihood(self, x: torch.Tensor) -> torch.Tensor:
        """``log q_m(x_j)`` for every row, coordinate and mode: ``x`` is ``(R, n, N)`` long, out ``(R, n, N, M)``."""
        replicas, num_modes, length, num_symbols = self.symbol_logits.shape
        log_symbol = torch.log_softmax(self.symbol_logits, dim=-1)
        table = log_symbol.permute(0, 2, 3, 1).reshape(replicas, length * num_symbols, num_modes)
        index = (torch.arange(length) * num_symbols + x).reshape(replicas, -1, 1).expand(-1, -1, num_modes)
        return torch.gather(table, 1, index).reshape(*x.shape, num_modes)

    def masked_log_likelihood(self, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """``log q(x_i | x_S)`` for every coordinate ``i``, shape ``(R, n, N)`` (meaningful where masked).

        ``x``: ``(R, n, N)`` long symbols; ``visible``: ``(R, n, N)`` bool, the set ``S`` of each row.
        """
        per_mode = self.per_mode_log_likelihood(x)
        evidence = (per_mode * visible[..., None]).sum(dim=2)  # Σ_{j∈S} log q_m(x_j): (R, n, M)
        log_posterior = torch.log_softmax(torch.log_softmax(self.mode_logits, -1)[:, None, :] + evidence, dim=-1)
        return torch.logsumexp(log_posterior[:, :, None, :] + per_mode, dim=-1)

    def masked_loss_per_replica(self, x: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """Per replica, the mean over rows of the mean over masked coordinates of ``-log q(x_i | x_S)``."""
        masked = (~visible).float()
        per_row = -(self.masked_log_likelihood(x, visible) * masked).sum(-1) / masked.sum(-1)
        return per_row.mean(dim=1)

    @torch.no_grad()
    def fully_masked_marginals(self) -> np.ndarray:
        """``q(x_i = k | nothing visible) = Σ_m q(m) q_m(x_i = k)``, shape ``(R, N, K)``."""
        prior = torch.softmax(self.mode_logits, dim=-1)
        return torch.einsum("rm,rmjk->rjk", prior, torch.softmax(self.symbol_logits, dim=-1)).double().numpy()

    @torch.no_grad()
    def as_mixture_law(self, replica: int) -> MixtureLaw:
        """Replica ``replica`` as an exact ``MixtureLaw`` of product modes (for enumeration)."""
        weights = torch.softmax(self.mode_logits[replica].double(), dim=-1).numpy()
        tables = torch.softmax(self.symbol_logits[replica].double(), dim=-1).numpy()
        return MixtureLaw(tuple(ProductMode(t) for t in tables), weights)


@dataclass(frozen=True, eq=False)
class TrainingSets:
    """One training set per (seed, schedule) replica, stacked: ``x`` and ``visible`` are ``(R, n, N)``."""

    x: np.ndarray
    visible: np.ndarray
    replicas: list[tuple[int, str]]  # (seed, schedule label) of each replica
    n_full_mask: list[int]  # fully-masked examples per replica
    full_mask_fraction: list[float]  # mode-0 fraction among them (NaN if none)


def draw_training_sets(law: MixtureLaw, schedules: Mapping[str, tuple[float, Schedule]], n_train: int,
                       n_seeds: int, seed: int) -> TrainingSets:
    """For every seed, ``n_train`` sequences from ``law`` (``Generator([seed, s])``), and for every schedule
    one visible set per sequence (``Generator([seed, s, c])``), so schedules differ only in their masks."""
    xs, visibles, replicas, n_full, fractions = [], [], [], [], []
    for s in range(n_seeds):
        x, modes = law.sample(n_train, np.random.default_rng([seed, s]))
        for c, (label, (_, schedule)) in enumerate(schedules.items()):
            visible = sample_visible_sets(schedule, law.length, n_train, np.random.default_rng([seed, s, c]))
            full = visible.sum(axis=1) == 0
            xs.append(x)
            visibles.append(visible)
            replicas.append((s, label))
            n_full.append(int(full.sum()))
            fractions.append(float(np.mean(modes[full] == 0)) if full.any() else math.nan)
    return TrainingSets(np.stack(xs), np.stack(visibles), replicas, n_full, fractions)


def fit_masked_predictors(data: TrainingSets, law: MixtureLaw, steps: int, lr: float,
                          seed: int) -> tuple[MixtureOfProductsPredictor, np.ndarray]:
    """Train one ``MixtureOfProductsPredictor`` replica per training set: full batch, Adam, ``steps`` steps,
    initialised from ``torch.Generator().manual_seed(seed)``. Returns the model and each replica's final
    training loss."""
    x, visible = torch.as_tensor(data.x), torch.as_tensor(data.visible)
    model = MixtureOfProductsPredictor(len(data.replicas), law.num_modes, law.length, law.num_symbols,
                                       torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    # one thread: for these tiny tensors, thread hand-offs cost more than they save, badly so on a shared machine
    with machine.torch_threads(1):
        for _ in range(steps):
            optimizer.zero_grad()
            model.masked_loss_per_replica(x, visible).sum().backward()
            optimizer.step()
        with torch.no_grad():
            final_loss = model.masked_loss_per_replica(x, visible).numpy()
    return model, final_loss


def train_mode_weight_recovery(
    law: MixtureLaw,
    schedules: Mapping[str, tuple[float, Schedule]],
    n_train: int = 1000,
    n_seeds: int = 8,
    steps: int = 200,
    lr: float = 0.1,
    seed: int = 0,
    exact_discrepancy: bool = True,
) -> pd.DataFrame:
    """Experiment (b): train masked predictors under each schedule and read back the mode weights.

    ``schedules`` maps a label to ``(pi0, schedule)``. For every seed, one training set of ``n_train``
    sequences is drawn from ``law``; every schedule draws its own visible set for each of those
    sequences (one fixed mask per sequence, so about ``n_train · π_0`` examples are fully masked). Each
    (schedule, seed) replica is trained full-batch with Adam for ``steps`` steps. The recovered weight
    is ``λ̂_0 = mean_i q(x_i ∈ A_{0,i})`` from the fully-masked prediction (``fully_masked_mode_weights``).

    When the modes have disjoint supports, examples with a visible symbol carry no information about
    the mode weights, so the best a model can do is the mode-0 fraction among the fully-masked
    examples (column ``full_mask_fraction``): its error is ``≈ sqrt(α_0 α_1 / (n π_0))``.

    With ``exact_discrepancy`` each trained model's population masked discrepancy ``D_π(q̂)`` under its
    training schedule is computed by enumeration (column ``discrepancy``), with the guarantee
    ``error_bound = sqrt(D_π(q̂) / (2 π_0))`` that its ``error`` must respect (NaN when ``π_0 = 0``).

    Returns one row per (schedule, seed): ``schedule, pi0, seed, true_weight, recovered_weight, error,
    n_full_mask, full_mask_fraction, final_loss`` (+ ``discrepancy, error_bound``).
    """
    mode_identifying_sets(law)  # the weights can only be read back when the supports are disjoint
    data = draw_training_sets(law, schedules, n_train, n_seeds, seed)
    model, final_loss = fit_masked_predictors(data, law, steps, lr, seed)
    marginals = model.fully_masked_marginals()
    alpha = float(law.weights[0])
    rows = []
    for r, (s, label) in enumerate(data.replicas):
        pi0, schedule = schedules[label]
        recovered = float(fully_masked_mode_weights(law, marginals[r])[0])
        row = {
            "schedule": label,
            "pi0": float(pi0),
            "seed": s,
            "true_weight": alpha,
            "recovered_weight": recovered,
            "error": abs(recovered - alpha),
            "n_full_mask": data.n_full_mask[r],
            "full_mask_fraction": data.full_mask_fraction[r],
            "final_loss": float(final_loss[r]),
        }
        if exact_discrepancy:
            row["discrepancy"] = max(masked_discrepancy(law, model.as_mixture_law(r), schedule), 0.0)
            row["error_bound"] = full_mask_weight_error_bound(row["discrepancy"], pi0) if pi0 > 0 else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def recovery_error_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per schedule: RMSE of the recovered weight, next to the RMSE of the best estimate the data allow
    (the mode-0 fraction among the fully-masked examples) and its theory ``sqrt(α_0 α_1 E[1/n_0])``,
    ``n_0 ≈ n π_0`` the number of fully-masked examples (the "sampling floor")."""
    rows = []
    for (label, pi0), part in table.groupby(["schedule", "pi0"], sort=False):
        alpha = part["true_weight"].iloc[0]
        counts = part["n_full_mask"].to_numpy()
        sampling_floor = math.sqrt(alpha * (1 - alpha) * np.mean(1 / counts)) if np.all(counts > 0) else math.nan
        rows.append({
            "schedule": label,
            "pi0": pi0,
            "rmse": float(np.sqrt(np.mean(part["error"] ** 2))),
            "mean_recovered": float(part["recovered_weight"].mean()),
            "rmse_full_mask_fraction": float(np.sqrt(np.nanmean((part["full_mask_fraction"] - alpha) ** 2)))
            if part["full_mask_fraction"].notna().any() else math.nan,
            "sampling_floor": sampling_floor,
            "mean_n_full_mask": float(part["n_full_mask"].mean()),
            "n_seeds": int(len(part)),
        })
    return pd.DataFrame(rows)
