"""Saliency masking (the paper's "Typhoon" strategy): mask the token types whose saliency says the
model would learn most from them.

Saliency
--------
s_i, the saliency of position i holding the true token t_i, is the gradient of the loss with respect to
the one-hot input of t_i, measured by :class:`typhoon.masking.saliency_probe.SaliencyProbe` (which says how).

Weights (EMA)
-------------
Per token type v, a batch estimate  w_hat_v = mean(+s_i over the selected occurrences of v)
+ mean(-s_i over its visible, non-special occurrences)  (a side with no occurrence adds 0), and
w_v <- (1 - lam) w_v + lam w_hat_v for the types seen in the batch; the first sighting sets
w_v = w_hat_v. Computed with ``bincount`` over the flattened batch. With ``ema_start="zeros"`` (the
paper's 2023 code) every weight starts at 0 instead: the first step sets w_v = w_hat_v for the types
in its batch, and a type first seen later gets lam w_hat_v.

Probabilities
-------------
After every update the weights are recalibrated (:mod:`typhoon.masking.calibration`) to pi_v with an
exact expected budget p over the corpus counts f_v (``budget="non_special"``), or, as the 2023 code did,
with beta solved in closed form over every input id, specials included (``budget="all_ids"``); never-seen
types get the neutral preference or, with ``unseen="top"``, the top one. Sampling is a lookup ``pi[input_ids]`` and a
Bernoulli draw. Before any update (nothing seen) pi = p everywhere: uniform random masking.

Where the state lives
---------------------
On the host by default: numpy float64, the reference and the CPU's path (the committed records' bits).
:meth:`TyphoonMasking.learn_on` a device keeps it there as torch tensors
(:mod:`typhoon.masking.device_calibration`: the same algorithm, sums in another order), so that a GPU step
whose batch, masks and saliency are on the GPU updates and samples without waiting for the device.

Per-row rates
-------------
A ``rate`` tensor (mask schedules) re-solves the budget for every row's rate with the same
preferences, water-filled, so still capped at 1 and exact in expectation. The solution for any
budget is (k, beta, floor): the k most preferred types get 1, the others max(min(1, beta b_v), floor)
(floor > 0 only when the rate exceeds what the types with a positive preference can hold, see
:class:`~typhoon.masking.calibration.BudgetSolver`); one ``searchsorted`` per row gives it, and the
token probabilities are then a lookup of (b, rank) at the batch's ids. Rate 1 masks everything,
rate 0 nothing.

Saliency source
---------------
``saliency="mlm"`` (the paper's) feeds :meth:`TyphoonMasking.update` the gradient of the MLM loss;
``saliency="task"`` the gradient of a task (classification) loss trained alongside it in phase 1
(:mod:`typhoon.masking.task_saliency`, which says how and why). The strategy does not compute saliency itself:
it declares where it wants it from (``saliency``) and the MLM phase provides it; the weights, signs and
calibrations above are the same for both sources.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch

from typhoon.masking.params import (
    BUDGET,
    CALIBRATION,
    CORRUPTION,
    DELTA,
    EMA_START,
    LAM,
    SALIENCY,
    STRATEGY_PARAMS,
    TAU,
    TYPHOON_2023,
    UNSEEN,
    P,
)

from .base import MaskingStrategy, maskable_positions
from .calibration import (
    budget_moved,
    budget_rule,
    kl_to_uniform,
    masked_distribution_kl,
    preference,
    realised_rate,
    spread,
)


def batch_weight_estimate(input_ids: torch.Tensor, maskable: torch.Tensor, selected: torch.Tensor,
                          saliency: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(types, w_hat): the distinct token types at the batch's maskable positions (sorted, int64) and their
    batch estimate (float64) of the module docstring. Host tensors.

    The means are taken over the batch's own types (at most B x L of them), not the vocabulary: the sums
    run in the batch's order, as a bincount over the vocabulary would, so the numbers are the same, at a
    fraction of the cost of two V-sized arrays per side."""
    ids = input_ids.reshape(-1).numpy()
    s = saliency.reshape(-1).double().numpy()
    counted = maskable.reshape(-1).numpy()
    chosen = (selected.bool().reshape(-1).numpy() & counted)[counted]  # per counted position: masked?
    types, slot = np.unique(ids[counted], return_inverse=True)
    signed = np.where(chosen, s[counted], -s[counted])  # + where masked, - where visible

    def mean_by_type(side: np.ndarray) -> np.ndarray:
        total = np.bincount(slot[side], weights=signed[side], minlength=len(types))
        count = np.bincount(slot[side], minlength=len(types))
        return np.where(count > 0, total / np.maximum(count, 1), 0.0)  # a side with no occurrence adds 0

    return types.astype(np.int64), mean_by_type(chosen) + mean_by_type(~chosen)


def ema_update(weights: np.ndarray, seen: np.ndarray, types: np.ndarray, estimate: np.ndarray,
               lam: float, first_weight: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """w <- (1 - lam) w + lam w_hat on the batch's ``types``; a first sighting gets w = first_weight w_hat
    (1: the estimate itself; lam: an EMA that started at 0). Returns copies."""
    weights, seen = weights.copy(), seen.copy()
    again = seen[types]
    weights[types] = np.where(again, (1.0 - lam) * weights[types] + lam * estimate,
                              first_weight * estimate)  # 1.0 * x is x, bit for bit
    seen[types] = True
    return weights, seen


class TyphoonMasking(MaskingStrategy):
    """Saliency-weighted token masking with an exact expected budget (see the module docstring).

    Parameters: ``p`` budget in (0, 1]; ``delta`` band width in [0, 1]; ``lam`` EMA rate in (0, 1];
    ``calibration`` in {minmax, rank, softmax}; ``tau`` > 0 (softmax temperature); ``saliency`` in
    {mlm, task} (which loss's gradient :meth:`update` receives); ``corruption``; and the three rules where
    the paper's 2023 code differs, each alone: ``ema_start`` in {first_sighting, zeros}, ``unseen`` in
    {neutral, top}, ``budget`` in {non_special, all_ids} (all three at the 2023 values: ``typhoon_2023``).
    """

    needs_saliency = True
    PARAMS = STRATEGY_PARAMS["typhoon"]  # declared in typhoon.masking.params

    def __init__(self, p: float = P.default, corruption: str = CORRUPTION.default, delta: float = DELTA.default,
                 lam: float = LAM.default, calibration: str = CALIBRATION.default, tau: float = TAU.default,
                 saliency: str = SALIENCY.default, ema_start: str = EMA_START.default, unseen: str = UNSEEN.default,
                 budget: str = BUDGET.default):  # the defaults declared in typhoon.masking.params
        super().__init__(p=p, corruption=corruption)
        self.delta = DELTA.check(delta)
        self.lam = LAM.check(lam)
        self.calibration = CALIBRATION.check(calibration)
        self.tau = TAU.check(tau)
        self.saliency = SALIENCY.check(saliency)
        self.ema_start = EMA_START.check(ema_start)
        self.unseen = UNSEEN.check(unseen)
        self.budget = BUDGET.check(budget)
        self.steps = 0
        self.counts: np.ndarray | None = None
        self.special_counts: np.ndarray | None = None  # budget="all_ids" only: the corpus counts of [CLS], [SEP], ...
        self._weights: np.ndarray | None = None
        self._seen: np.ndarray | None = None
        self._probs: np.ndarray | None = None
        self._solver = None  # the budget rule's solver (typhoon.masking.calibration.budget_rule)
        self._lookup: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # device -> (preference, rank)
        # learn_on(device): the state as tensors there (typhoon.masking.device_calibration), else None
        self._device: torch.device | None = None
        self._on_device: dict[str, torch.Tensor] = {}  # weights, seen, counts of the budget rule
        self._device_budget = None  # device_calibration.DeviceBudget of the current weights

    @property
    def name(self) -> str:
        if self.calibration == "minmax" and self.saliency == "mlm" and self.rules_2023() == set(TYPHOON_2023):
            return "typhoon_2023"
        name = "typhoon" if self.calibration == "minmax" else f"typhoon_{self.calibration}"
        return name if self.saliency == "mlm" else f"{name}_{self.saliency}"

    def rules_2023(self) -> set[str]:
        """The calibration rules set as the paper's 2023 code had them (typhoon.masking.params.TYPHOON_2023)."""
        return {rule for rule, value in TYPHOON_2023.items() if getattr(self, rule) == value}

    # The learnt state as numpy arrays, wherever it lives (read from the device when it lives there).
    @property
    def weights(self) -> np.ndarray | None:
        """EMA weight w_v per type (NaN where never seen)."""
        return self._to_host("weights") if self._device is not None else self._weights

    @weights.setter
    def weights(self, value: np.ndarray) -> None:  # then recalibrate(), as after any change of the weights
        self._weights = np.asarray(value, dtype=np.float64)
        if self._device is not None:
            self._on_device["weights"] = torch.as_tensor(self._weights, device=self._device)

    @property
    def seen(self) -> np.ndarray | None:
        return self._to_host("seen") if self._device is not None else self._seen

    @seen.setter
    def seen(self, value: np.ndarray) -> None:
        self._seen = np.asarray(value, dtype=bool)
        if self._device is not None:
            self._on_device["seen"] = torch.as_tensor(self._seen, device=self._device)

    @property
    def probs(self) -> np.ndarray | None:
        """pi_v at the budget p."""
        if self._device is not None and self._device_budget is not None:
            return self._device_budget.probs(self.p).cpu().numpy()
        return self._probs

    def _to_host(self, name: str) -> np.ndarray | None:
        tensor = self._on_device.get(name)
        return None if tensor is None else tensor.cpu().numpy()

    @property
    def vocab_size(self) -> int | None:
        return None if self.counts is None else len(self.counts)

    # -- corpus counts and recalibration ---------------------------------------------------------
    def prepare(self, token_counts: np.ndarray | None, special_counts: np.ndarray | None = None) -> None:
        """Set the corpus counts f_v (non-special tokens, (V,)) and reset the state to uniform p.
        ``special_counts``: the counts of the special tokens in the same text ((V,)), which only the
        ``all_ids`` budget uses (and requires)."""
        counts = np.asarray(token_counts)
        if counts.ndim != 1 or counts.size == 0 or (counts < 0).any() or counts.sum() <= 0:
            raise ValueError("token_counts must be a non-empty 1-D array of non-negative counts with a positive sum")
        if self.budget == "all_ids":
            if special_counts is None:
                raise ValueError("budget='all_ids' counts every input id: prepare() needs special_counts too")
            special_counts = np.asarray(special_counts)
            if special_counts.shape != counts.shape or (special_counts < 0).any():
                raise ValueError(f"special_counts must be non-negative counts of shape {counts.shape}, "
                                 f"got {special_counts.shape}")
            self.special_counts = special_counts.astype(np.int64)
        self.counts = counts.astype(np.int64)
        self.steps = 0
        self._set_state(np.full(len(counts), np.nan), np.zeros(len(counts), dtype=bool))

    def _require_prepared(self) -> None:
        if self.counts is None:
            raise RuntimeError("TyphoonMasking needs corpus token counts: call prepare(token_counts) first")

    def learn_on(self, device: torch.device | str | None) -> TyphoonMasking:
        """Where the learnt state lives and learns: None (the default), numpy arrays on the host
        (:mod:`typhoon.masking.calibration`, the CPU's path); a device, torch tensors there
        (:mod:`typhoon.masking.device_calibration`), so that a step whose batch and saliency are on that
        device updates and samples with no host transfer. The state moves with it; returns the strategy."""
        weights, seen = self.weights, self.seen
        self._device = None if device is None else torch.device(device)
        if self.counts is not None:
            self._set_state(weights, seen)
        return self

    @property
    def device(self) -> torch.device | None:
        """Where the state learns (:meth:`learn_on`); None: on the host, in numpy."""
        return self._device

    def _set_state(self, weights: np.ndarray, seen: np.ndarray) -> None:
        """Hold ``weights`` and ``seen`` where the state learns, and recalibrate."""
        self._weights, self._seen = weights, seen
        if self._device is not None:
            budget_counts = self.counts if self.budget == "non_special" else self.counts + self.special_counts
            self._on_device = {"weights": torch.as_tensor(weights, dtype=torch.float64, device=self._device),
                               "seen": torch.as_tensor(seen, device=self._device),
                               "counts": torch.as_tensor(budget_counts, dtype=torch.float64, device=self._device)}
            self._weights = self._seen = self._probs = self._solver = None
        else:
            self._on_device, self._device_budget = {}, None
        self.recalibrate()

    def recalibrate(self) -> None:
        """Recompute pi for budget p from the current weights (and forget per-rate solutions)."""
        self._require_prepared()
        self._lookup.clear()
        if self._device is not None:
            from typhoon.masking import device_calibration

            state = self._on_device
            pref = device_calibration.preference(state["weights"], state["seen"], self.calibration, self.delta,
                                                 self.tau, self.unseen)
            self._device_budget = device_calibration.DeviceBudget.solve_for(pref, state["counts"],
                                                                            closed_form=self.budget == "all_ids")
            return
        pref = preference(self._weights, self.calibration, self.delta, self.tau, self._seen, self.unseen)
        self._solver = budget_rule(self.budget, pref, self.counts, self.special_counts)
        self._probs = self._solver.solve(self.p)

    def probs_for_rate(self, rate: float) -> np.ndarray:
        """Float64 (V,) probabilities for budget ``rate`` (same preferences, water-filled again)."""
        self._require_prepared()
        if self._device is not None:
            return self._device_budget.probs(rate).cpu().numpy()
        return self._probs.copy() if rate == self.p else self._solver.solve(rate)

    def _lookup_tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        key = str(device)
        if key not in self._lookup:
            self._lookup[key] = (torch.as_tensor(self._solver.pref, dtype=torch.float64, device=device),
                                 torch.as_tensor(self._solver.rank, device=device))
        return self._lookup[key]

    def token_probs(self, input_ids: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
        """Float64 (B, L): pi of every token for its row's budget (a lookup, no V-sized work per row)."""
        if self._device is not None:
            return self._device_budget.token_probs(input_ids, rates)
        k, beta, floor = self._solver.coefficients(rates.detach().cpu().numpy())
        device = input_ids.device
        pref, rank = self._lookup_tables(device)
        flat = input_ids.reshape(-1)
        token_pref = pref.index_select(0, flat).view(input_ids.shape)
        token_rank = rank.index_select(0, flat).view(input_ids.shape)
        k = torch.as_tensor(k, device=device)[:, None]
        beta = torch.as_tensor(beta, dtype=torch.float64, device=device)[:, None]
        floor = torch.as_tensor(floor, dtype=torch.float64, device=device)[:, None]
        return torch.where(token_rank < k, 1.0, torch.maximum((beta * token_pref).clamp(max=1.0), floor))

    # -- sampling --------------------------------------------------------------------------------
    def _select(self, batch, maskable, rates, generator):
        input_ids = batch["input_ids"]
        u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
        if self.counts is None:  # never prepared: nothing to calibrate against, behave like random
            return (u < rates[:, None]) & maskable
        return (u < self.token_probs(input_ids, rates)) & maskable

    # -- learning --------------------------------------------------------------------------------
    def update(self, batch: dict[str, torch.Tensor], selected: torch.Tensor, saliency: torch.Tensor) -> None:
        """EMA update of the weights from one step's saliency, then recalibration.

        ``batch["input_ids"]`` must hold the ORIGINAL tokens (the strategy never modifies them),
        ``selected`` the positions that were masked (``mlm_labels != -100``). On the host path they are
        read on the host (a saliency on a GPU is copied down, which waits for it); after
        :meth:`learn_on` a device, they are read where the state is, and nothing waits.
        """
        self._require_prepared()
        if saliency.shape != batch["input_ids"].shape or selected.shape != batch["input_ids"].shape:
            raise ValueError(f"saliency {tuple(saliency.shape)} and selected {tuple(selected.shape)} must match "
                             f"input_ids {tuple(batch['input_ids'].shape)}")
        # an EMA from zero (the 2023 code) gives a type first seen after the first step lam x its estimate
        first_weight = self.lam if self.ema_start == "zeros" and self.steps > 0 else 1.0
        self.steps += 1
        if self._device is not None:
            from typhoon.masking import device_calibration

            on = {k: v.to(self._device, non_blocking=True) for k, v in batch.items() if isinstance(v, torch.Tensor)}
            present, estimate = device_calibration.batch_estimate(
                on["input_ids"], maskable_positions(on), selected.to(self._device, non_blocking=True),
                saliency.detach().to(self._device, non_blocking=True), len(self.counts))
            state = self._on_device
            state["weights"], state["seen"] = device_calibration.ema_update(state["weights"], state["seen"], present,
                                                                            estimate, self.lam, first_weight)
        else:
            cpu = {k: v.cpu() for k, v in batch.items() if isinstance(v, torch.Tensor)}
            types, estimate = batch_weight_estimate(cpu["input_ids"], maskable_positions(cpu), selected.cpu(),
                                                    saliency.detach().cpu())
            self._weights, self._seen = ema_update(self._weights, self._seen, types, estimate, self.lam, first_weight)
        self.recalibrate()

    def batch_sums(self, batch: dict[str, torch.Tensor], selected: torch.Tensor,
                   saliency: torch.Tensor) -> torch.Tensor:
        """Float64 (4, V) where the state learns: what :meth:`update` learns from one batch, as per-type sums and
        counts of each side (:func:`typhoon.masking.device_calibration.type_sums`). The sums of several batches
        (the ranks' of one data-parallel step) given to :meth:`update_from_sums` are one update from those
        batches taken together (:mod:`typhoon.masking.across_ranks`)."""
        from typhoon.masking import device_calibration

        self._require_prepared()
        if saliency.shape != batch["input_ids"].shape or selected.shape != batch["input_ids"].shape:
            raise ValueError(f"saliency {tuple(saliency.shape)} and selected {tuple(selected.shape)} must match "
                             f"input_ids {tuple(batch['input_ids'].shape)}")
        device = self._device or torch.device("cpu")
        on = {k: v.to(device, non_blocking=True) for k, v in batch.items() if isinstance(v, torch.Tensor)}
        return device_calibration.type_sums(on["input_ids"], maskable_positions(on),
                                            selected.to(device, non_blocking=True),
                                            saliency.detach().to(device, non_blocking=True), len(self.counts))

    def update_from_sums(self, sums: torch.Tensor) -> None:
        """The EMA update and recalibration of :meth:`update`, from summed statistics (:meth:`batch_sums`)."""
        from typhoon.masking import device_calibration

        self._require_prepared()
        if tuple(sums.shape) != (4, len(self.counts)):
            raise ValueError(f"sums must have shape (4, {len(self.counts)}), got {tuple(sums.shape)}")
        first_weight = self.lam if self.ema_start == "zeros" and self.steps > 0 else 1.0  # as in update()
        self.steps += 1
        present, estimate = device_calibration.estimate_from_sums(sums)
        if self._device is not None:
            state = self._on_device
            state["weights"], state["seen"] = device_calibration.ema_update(
                state["weights"], state["seen"], present.to(self._device), estimate.to(self._device), self.lam,
                first_weight)
        else:
            types = np.flatnonzero(present.cpu().numpy())
            self._weights, self._seen = ema_update(self._weights, self._seen, types, estimate.cpu().numpy()[types],
                                                   self.lam, first_weight)
        self.recalibrate()

    # -- diagnostics and state -------------------------------------------------------------------
    def diagnostics(self) -> dict[str, Any]:
        """KL to uniform (nats/token), KL and TV of the masked distribution, spread of pi."""
        if self.counts is None:
            return {}
        probs, seen = self.probs, self.seen
        out = {
            "kl_to_uniform": kl_to_uniform(probs, self.counts, self.p),
            "masked_distribution_kl": masked_distribution_kl(probs, self.counts),
            "budget_moved": budget_moved(probs, self.counts),
            "n_seen": int(seen.sum()),
        }
        if self.budget != "non_special":  # the exact budget's realised rate is p
            out["realised_rate"] = realised_rate(probs, self.counts)
        out.update({f"spread_{k}": v for k, v in spread(probs, seen).items()})
        return out

    def meta(self) -> dict[str, Any]:
        """Parameters, step count and diagnostics; non-finite numbers become None (strict JSON)."""
        diagnostics = {k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                       for k, v in self.diagnostics().items()}
        return {**super().meta(), "steps": self.steps, "vocab_size": self.vocab_size, **diagnostics}

    def state_dict(self) -> dict[str, Any]:
        """Arrays ``weights`` (NaN unseen), ``counts``, ``seen``, ``probs`` and ``meta`` (CONTRACTS.md)."""
        if self.counts is None:
            empty = np.zeros(0)
            return {"weights": empty, "counts": empty.astype(np.int64), "seen": empty.astype(bool),
                    "probs": empty, "meta": self.meta()}
        seen = self.seen
        state = {"weights": np.where(seen, self.weights, np.nan), "counts": self.counts.copy(), "seen": seen.copy(),
                 "probs": self.probs.copy(), "meta": self.meta()}
        if self.special_counts is not None:  # budget="all_ids"
            state["special_counts"] = self.special_counts.copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        counts = np.asarray(state["counts"])
        if counts.size == 0:
            self.counts = self._weights = self._seen = self._probs = self._solver = self._device_budget = None
            self._on_device = {}
            return
        self.counts = counts.astype(np.int64)
        if self.budget == "all_ids":
            if "special_counts" not in state:
                raise ValueError("state of a budget='all_ids' strategy without its special_counts")
            self.special_counts = np.asarray(state["special_counts"]).astype(np.int64)
        seen = np.asarray(state["seen"], dtype=bool).copy()
        meta = state.get("meta", {})
        meta = json.loads(meta) if isinstance(meta, str) else meta
        self.steps = int(meta.get("steps", 0))
        self._set_state(np.where(seen, np.asarray(state["weights"], dtype=np.float64), np.nan), seen)
