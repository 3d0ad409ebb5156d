"""What every masking strategy shares: parameter validation, the maskable positions, per-row budgets,
BERT-style corruption of the selected tokens, and (trivial) state.

A strategy only decides *which* positions to select (:meth:`MaskingStrategy._select`); everything
around that decision (rates, special tokens, 80/10/10 corruption, labels) lives here so that all
strategies are compared under exactly the same rules.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import torch

# The parameter declarations, with the values each allows, live in typhoon.masking.params (torch-free, for
# the CLI and the config); the checks behind them in typhoon.allowed.
from typhoon.data import token_counts
from typhoon.masking.params import BASE_PARAMS, CORRUPTION, P, Param, check_rates

IGNORE_INDEX = -100  # label value the MLM loss skips

# BERT's corruption of the selected tokens: 80% [MASK], 10% a random token, 10% unchanged.
MASK_REPLACE_PROB = 0.8
RANDOM_REPLACE_PROB = 0.1


# --------------------------------------------------------------------------------------------------
# Batch helpers


def maskable_positions(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Bool (B, L): real, non-special tokens. [CLS], [SEP] and padding are never selected."""
    input_ids = batch["input_ids"]
    maskable = torch.ones_like(input_ids, dtype=torch.bool)
    if "special_tokens_mask" in batch:
        maskable &= ~batch["special_tokens_mask"].bool()
    if "attention_mask" in batch:
        maskable &= batch["attention_mask"].bool()
    return maskable


def row_rates(batch: dict[str, torch.Tensor], rate: Any, default: float) -> torch.Tensor:
    """Float64 (B,) masking budget of every row: ``default`` (the strategy's p) when ``rate`` is None.

    ``rate`` may be a float or a (B,) tensor of per-sequence budgets in [0, 1] (mask schedules use
    it; 1.0 masks every maskable token of the row).
    """
    input_ids = batch["input_ids"]
    n_rows = input_ids.shape[0]
    if rate is None:
        return torch.full((n_rows,), default, dtype=torch.float64, device=input_ids.device)
    if isinstance(rate, Real) and not isinstance(rate, bool):
        rate = torch.full((n_rows,), float(rate), dtype=torch.float64, device=input_ids.device)
    if not isinstance(rate, torch.Tensor):
        raise ValueError(f"rate must be None, a float or a float tensor of shape ({n_rows},), got {rate!r}")
    rate = rate.to(device=input_ids.device, dtype=torch.float64).reshape(-1)
    if rate.shape[0] != n_rows:
        raise ValueError(f"rate must have one value per row: shape ({n_rows},), got {tuple(rate.shape)}")
    # checked where reading them costs nothing; on a GPU they come from a schedule, in [0, 1] by construction,
    # and reading them back would make the step wait for the device
    return check_rates(rate) if rate.device.type == "cpu" else rate


def word_ids_of(batch: dict[str, torch.Tensor], strategy: str) -> torch.Tensor:
    if "word_ids" not in batch:
        raise ValueError(f"the {strategy!r} strategy needs 'word_ids' in the batch (see docs/CONTRACTS.md)")
    return batch["word_ids"]


# --------------------------------------------------------------------------------------------------
# Corruption


def corrupt(input_ids: torch.Tensor, selected: torch.Tensor, generator: torch.Generator, *,
            mask_token_id: int, vocab_size: int, corruption: str = "bert") -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt the selected positions; return ``(masked input ids, MLM labels)``.

    ``"bert"``: each selected token becomes [MASK] with probability 0.8, a token drawn uniformly from
    ``[0, vocab_size)`` with probability 0.1, and stays unchanged otherwise (as in BERT and
    ``DataCollatorForLanguageModeling``; a single uniform draw decides the three cases).
    ``"mask_only"``: every selected token becomes [MASK]. Labels hold the original token where
    selected and -100 elsewhere. ``input_ids`` is not modified.
    """
    CORRUPTION.check(corruption)  # the strategies' declaration: the same values, the same message
    selected = selected.bool()
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    if corruption == "mask_only":
        return input_ids.masked_fill(selected, mask_token_id), labels
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = selected & (u < MASK_REPLACE_PROB)
    to_random = selected & (u >= MASK_REPLACE_PROB) & (u < MASK_REPLACE_PROB + RANDOM_REPLACE_PROB)
    random_tokens = torch.randint(vocab_size, input_ids.shape, generator=generator, device=input_ids.device,
                                  dtype=input_ids.dtype)
    out = torch.where(to_random, random_tokens, input_ids)
    return out.masked_fill(to_mask, mask_token_id), labels


# --------------------------------------------------------------------------------------------------
# Base class


class MaskingStrategy:
    """Select positions to mask in a padded batch, then corrupt them BERT-style.

    Subclasses implement :meth:`_select` (fully vectorized over the batch) and declare their
    constructor parameters in ``PARAMS`` (the base's two plus their own), each stored as an attribute
    of the same name. The budget ``p`` is the expected fraction of maskable tokens selected; every
    strategy honours a per-row ``rate`` instead of ``p`` when one is given.
    """

    name = "base"
    needs_saliency = False
    PARAMS: tuple[Param, ...] = BASE_PARAMS

    def __init__(self, p: float = P.default, corruption: str = CORRUPTION.default):
        self.p = P.check(p)
        self.corruption = CORRUPTION.check(corruption)

    def __init_subclass__(cls, **kwargs):
        """A subclass that declares more ``PARAMS`` than its inherited constructor takes, and writes no
        constructor, gets one from the declaration: each parameter a keyword with its declared default,
        checked and stored under its name (a strategy of your own is then its ``PARAMS`` and ``_select``:
        docs/extending.md). The built-in strategies write their constructors; nothing changes for them."""
        super().__init_subclass__(**kwargs)
        inherited = inspect.signature(cls.__init__).parameters
        if "__init__" not in vars(cls) and any(param.name not in inherited for param in cls.PARAMS):
            cls.__init__ = declared_constructor(cls)

    # -- parameters ------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        """The constructor arguments, enough to rebuild the strategy with ``get_strategy``."""
        return {param.name: getattr(self, param.name) for param in self.PARAMS}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    # -- the interface of docs/CONTRACTS.md ------------------------------------------------------
    def prepare(self, token_counts: np.ndarray | None, special_counts: np.ndarray | None = None) -> None:
        """Corpus token counts f_v of the non-special tokens, and of the special ones; only Typhoon uses them."""

    def prepare_on(self, examples: Sequence[Mapping], vocab_size: int) -> None:
        """:meth:`prepare` with the counts of tokenized ``examples`` (their ``input_ids`` and
        ``special_tokens_mask``): the corpus a strategy is calibrated on, its training text."""
        ids = [x["input_ids"] for x in examples]
        special = [x["special_tokens_mask"] for x in examples]
        self.prepare(token_counts(ids, special, vocab_size),
                     special_counts=token_counts(ids, special, vocab_size, special=True))

    def select(self, batch: dict[str, torch.Tensor], generator: torch.Generator,
               rate: torch.Tensor | float | None = None) -> torch.Tensor:
        """Bool (B, L): the positions to mask, among :meth:`selectable_positions` (never padding; never a special
        token, but for the random arm that draws them as the 2023 code did)."""
        rates = row_rates(batch, rate, self.p)
        maskable = self.selectable_positions(batch)
        return self._select(batch, maskable, rates, generator) & maskable

    def selectable_positions(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Bool (B, L): where this strategy may select, :func:`maskable_positions` (one rule, the 2023 random
        arm's, widens it: :class:`typhoon.masking.random.RandomMasking`)."""
        return maskable_positions(batch)

    def _select(self, batch: dict[str, torch.Tensor], maskable: torch.Tensor, rates: torch.Tensor,
                generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, batch: dict[str, torch.Tensor], generator: torch.Generator, *, mask_token_id: int,
                 vocab_size: int, rate: torch.Tensor | float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked input ids and MLM labels (-100 where not selected) for a padded batch."""
        selected = self.select(batch, generator, rate=rate)
        return corrupt(batch["input_ids"], selected, generator, mask_token_id=mask_token_id,
                       vocab_size=vocab_size, corruption=self.corruption)

    def update(self, batch: dict[str, torch.Tensor], selected: torch.Tensor, saliency: torch.Tensor) -> None:
        """Learn from a training step's saliency; a no-op except for Typhoon."""

    def learn_on(self, device: torch.device | str | None) -> MaskingStrategy:
        """Keep what the strategy learns on ``device`` (None: the host); only Typhoon learns anything."""
        return self

    # -- state -----------------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {"name": self.name, **self.params}

    def state_dict(self) -> dict[str, Any]:
        return {"meta": self.meta()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        meta = state.get("meta", {})
        if isinstance(meta, str):
            meta = json.loads(meta)
        for key, value in self.params.items():
            if key in meta and meta[key] != value:
                raise ValueError(f"state was saved with {key}={meta[key]!r}, this strategy has {key}={value!r}")

    def save(self, path: str | Path, compressed: bool = False) -> Path:
        """Write the state as ``.npz`` (arrays plus a JSON ``meta`` string; see docs/CONTRACTS.md);
        ``compressed``: deflated (a quarter of the size for a Typhoon state; :func:`load_state` reads both)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = self.state_dict()
        arrays = {k: v for k, v in state.items() if k != "meta"}
        with open(path, "wb") as fh:  # a file handle keeps np.savez from appending ".npz"
            (np.savez_compressed if compressed else np.savez)(fh, meta=np.array(json.dumps(state["meta"])), **arrays)
        return path


def declared_constructor(cls: type[MaskingStrategy]):
    """``__init__`` for ``cls`` from its ``PARAMS``: keywords with the declared defaults, each value checked
    (``Param.check``) and stored as the attribute of the same name."""
    declared = tuple(cls.PARAMS)

    def __init__(self, **values):
        unknown = sorted(set(values) - {param.name for param in declared})
        if unknown:
            raise TypeError(f"{cls.__name__} got unknown parameter(s) {unknown}; it declares "
                            f"{[param.name for param in declared]}")
        MaskingStrategy.__init__(self, p=values.get("p", P.default), corruption=values.get("corruption", CORRUPTION.default))
        for param in declared:
            if param.name not in ("p", "corruption"):
                setattr(self, param.name, param.check(values.get(param.name, param.default)))

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(param.name, inspect.Parameter.KEYWORD_ONLY, default=param.default) for param in declared])
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def load_state(path: str | Path) -> dict[str, Any]:
    """Read a ``masking_state.npz``: its arrays, and ``meta`` parsed from JSON into a dict."""
    with np.load(Path(path), allow_pickle=False) as data:
        state = {key: data[key] for key in data.files}
    state["meta"] = json.loads(str(state["meta"])) if "meta" in state else {}
    return state
