"""Helpers for the walkthrough notebooks (``notebooks/00_setup``, ``01_masking_walkthrough``).

Small, readable views on what the rest of the package does: a token table with word ids, the tokens
each masking strategy selects (as HTML), empirical masking rates against the budget p, and Typhoon's
saliency on a real sentence after a few real MLM steps. Nothing here re-implements masking, data
loading or training: it calls :mod:`typhoon.data.glue_files`, :mod:`typhoon.masking`, :mod:`typhoon.models.backbones` and
:mod:`typhoon.training.run`. The setup report is :mod:`typhoon.report.setup_tables`; the figures are
:func:`typhoon.report.masking_figures.plot_rates` and :func:`typhoon.report.masking_figures.plot_saliency`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from typhoon import figure_style
from typhoon.config import RunConfig
from typhoon.data import collate
from typhoon.masking import (
    MaskingStrategy,
    SaliencyProbe,
    get_strategy,
    kl_to_uniform,
    maskable_positions,
)
from typhoon.records import LOSS_COLUMNS
from typhoon.training import prepare_data
from typhoon.training import run as training_run

__all__ = [
    "SaliencyDemo",
    "batch_row",
    "draw_selections",
    "load_examples",
    "prepared_strategies",
    "rate_table",
    "saliency_demo",
    "selection_html",
    "token_table",
]


# --------------------------------------------------------------------------------------------------
# Tokens, word ids and strategies' selections


def load_examples(task: str, tokenizer, n: int = 64, split: str = "train", max_length: int = 128) -> list[dict]:
    """The first ``n`` tokenized examples of a split (contract keys), via :func:`typhoon.training.examples.prepare_data`."""
    if split not in ("train", "validation"):
        raise ValueError(f"split must be 'train' or 'validation', got {split!r}")
    caps = {"train": n, "validation": 1} if split == "train" else {"train": 1, "validation": n}
    config = RunConfig(task=task, max_length=max_length, max_train_examples=caps["train"],
                       max_eval_examples=caps["validation"])
    return prepare_data(config, tokenizer)[split]


def token_table(example: Mapping, tokenizer) -> pd.DataFrame:
    """One row per token of a tokenized example: position, token, id, word id (-1 = special), special, segment."""
    ids = list(example["input_ids"])
    table = pd.DataFrame({
        "position": range(len(ids)),
        "token": tokenizer.convert_ids_to_tokens(ids),
        "token_id": ids,
        "word_id": [int(w) for w in example["word_ids"]],
        "special": [bool(s) for s in example["special_tokens_mask"]],
    })
    if "token_type_ids" in example:
        table["segment"] = [int(t) for t in example["token_type_ids"]]
    return table


def batch_row(batch: Mapping[str, torch.Tensor], i: int) -> dict[str, torch.Tensor]:
    """Row ``i`` of a padded batch: every (B, L) tensor as an (L,) tensor."""
    return {k: v[i] for k, v in batch.items() if v.dim() == 2}


def prepared_strategies(names: Iterable[str], examples: Sequence[Mapping], vocab_size: int,
                        p: float = 0.15) -> dict[str, MaskingStrategy]:
    """Strategies by name with budget p, prepared with the token counts of ``examples``."""
    strategies = {}
    for name in names:
        strategies[name] = get_strategy(name, p=p)
        strategies[name].prepare_on(examples, vocab_size)
    return strategies


def draw_selections(strategies: Mapping[str, MaskingStrategy], batch: Mapping[str, torch.Tensor],
                    generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One draw of ``select`` per strategy on the same batch: name -> bool (B, L)."""
    return {name: strategy.select(batch, generator) for name, strategy in strategies.items()}


def _light_hex(color, mix: float = 0.45) -> str:
    """A strategy colour blended with white (readable behind black text), as #rrggbb."""
    r, g, b = (int(round(255 * (mix * c + (1 - mix)))) for c in color[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def selection_html(row: Mapping[str, torch.Tensor], selections: Mapping[str, torch.Tensor], tokenizer) -> str:
    """An HTML table, one row per strategy, showing a sentence with the tokens it selected highlighted.

    ``row`` is one row of a padded batch (:func:`batch_row`); ``selections`` maps a strategy name to a
    bool (L,) tensor for that row. Padding is not shown; special tokens are grey. Selected tokens carry
    ``data-selected="1"`` and the strategy's colour (``typhoon.figure_style.strategy_palette``).
    """
    ids = row["input_ids"].tolist()
    real = row["attention_mask"].bool().tolist() if "attention_mask" in row else [True] * len(ids)
    special = row["special_tokens_mask"].bool().tolist()
    tokens = tokenizer.convert_ids_to_tokens(ids)
    palette = figure_style.strategy_palette(selections)
    lines = ['<table class="typhoon-selection" style="border-collapse:collapse;font-family:monospace">',
             "<tr><th>strategy</th><th>selected</th><th style='text-align:left'>tokens</th></tr>"]
    for name, selected in selections.items():
        selected = torch.as_tensor(selected).bool().reshape(-1)
        if selected.numel() != len(ids):
            raise ValueError(f"selection {name!r} has {selected.numel()} positions, the row has {len(ids)}")
        colour = _light_hex(palette[name])
        spans = []
        for token, is_real, is_special, is_selected in zip(tokens, real, special, selected.tolist(), strict=True):
            if not is_real:
                continue
            text = html.escape(token)
            if is_selected:
                spans.append(f'<span data-selected="1" style="background:{colour};font-weight:bold;'
                             f'padding:0 2px;border-radius:3px">{text}</span>')
            elif is_special:
                spans.append(f'<span data-selected="0" style="color:#999">{text}</span>')
            else:
                spans.append(f'<span data-selected="0">{text}</span>')
        n_selected = int((selected & torch.as_tensor(real)).sum())
        n_maskable = sum(r and not s for r, s in zip(real, special, strict=True))
        lines.append(f'<tr data-strategy="{html.escape(name)}"><th style="text-align:left">{html.escape(name)}</th>'
                     f"<td>{n_selected}/{n_maskable}</td>"
                     f"<td style='text-align:left;white-space:normal'>{' '.join(spans)}</td></tr>")
    lines.append("</table>")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Empirical rates


def _split_word_share(batch: Mapping[str, torch.Tensor], selected: torch.Tensor, maskable: torch.Tensor) -> float:
    """Among multi-piece words with at least one selected piece, the share not selected entirely."""
    word_ids = batch["word_ids"]
    has_word = maskable & (word_ids >= 0)
    n_slots = int(word_ids.max()) + 1
    safe = word_ids.clamp(min=0)
    pieces = torch.zeros((word_ids.shape[0], n_slots), dtype=torch.long).scatter_add_(1, safe, has_word.long())
    chosen = torch.zeros_like(pieces).scatter_add_(1, safe, (selected & has_word).long())
    touched = (pieces > 1) & (chosen > 0)
    return float(((chosen < pieces) & touched).sum() / touched.sum()) if touched.any() else float("nan")


def rate_table(strategies: Mapping[str, MaskingStrategy] | Iterable[MaskingStrategy],
               batch: Mapping[str, torch.Tensor], draws: int, generator: torch.Generator) -> pd.DataFrame:
    """Empirical masking rate of each strategy over ``draws`` selections of the same batch.

    One row per strategy: its budget ``p``, the mean share of maskable tokens selected, the spread
    of that share between draws (``sd_rate``), the standard error of the mean (``se``), and
    ``split_word_share``: how often a multi-piece word that is touched is only partly selected
    (0 for word-aligned strategies). ``strategies`` is a name -> strategy mapping, or strategies
    (labelled by their ``name``).
    """
    if draws < 2:
        raise ValueError(f"draws must be >= 2, got {draws}")
    items = strategies.items() if isinstance(strategies, Mapping) else ((s.name, s) for s in strategies)
    maskable = maskable_positions(batch)
    n_maskable = int(maskable.sum())
    rows = []
    for name, strategy in items:
        rates, split = [], []
        for _ in range(draws):
            selected = strategy.select(batch, generator)
            rates.append(int(selected.sum()) / n_maskable)
            split.append(_split_word_share(batch, selected, maskable))
        rates = np.asarray(rates)
        rows.append({"strategy": name, "p": strategy.p, "draws": draws, "mean_rate": rates.mean(),
                     "sd_rate": rates.std(ddof=1), "se": rates.std(ddof=1) / np.sqrt(draws),
                     "split_word_share": float(np.nanmean(split)) if not np.isnan(split).all() else float("nan")})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# Typhoon's saliency on a real sentence


@dataclass
class SaliencyDemo:
    """What :func:`saliency_demo` returns."""

    config: RunConfig
    strategy: MaskingStrategy  # the trained Typhoon strategy (EMA weights, calibrated probs)
    example: dict  # the tokenized training example the saliency is shown for
    batch: dict  # that example as a padded batch of one row (contract keys)
    tokens: pd.DataFrame  # token_table + selected, saliency, weight, pi, count
    diagnostics: dict  # steps, loss, kl_to_uniform (all / seen types) and the strategy's other diagnostics
    mlm_loss: pd.DataFrame  # the training run's loss rows (step, epoch, split, loss)

    @property
    def row(self) -> dict[str, torch.Tensor]:
        """The example as one row (for :func:`selection_html`)."""
        return batch_row(self.batch, 0)


def saliency_demo(backbone_name: str = "tiny-random", task: str = "mrpc", steps: int = 4, seed: int = 0, *,
                  batch_size: int = 16, max_length: int = 64, p: float = 0.15, example: int = 0) -> SaliencyDemo:
    """Train Typhoon for ``steps`` real MLM steps, then show its saliency on one dev sentence.

    Training is a run's phase 1 (:func:`typhoon.training.run.phase_one`, the same code as every run) on the first
    ``steps * batch_size`` training examples (one epoch: every step masks with Typhoon, reads the saliency with
    :class:`SaliencyProbe` and calls ``strategy.update``). The sentence (training example ``example``, so its token types have weights)
    is then masked by the trained strategy (redrawn until at least one token is selected) and one
    forward/backward pass under the probe gives each token's saliency s_i = <dL/dx_i, W[t_i]>, without
    updating the model or the strategy.
    """
    if not 0 <= example < steps * batch_size:
        raise ValueError(f"example must index one of the {steps * batch_size} training examples, got {example}")
    config = RunConfig(task=task, backbone=backbone_name, strategy="typhoon", seed=seed, p=p, mlm_epochs=1,
                       batch_size=batch_size, eval_batch_size=batch_size, max_length=max_length,
                       max_train_examples=steps * batch_size, max_eval_examples=batch_size,
                       precision="fp32")
    ctx = training_run.set_up(config, progress=False)
    tokenizer, data = ctx.backbone.tokenizer, ctx.data
    one = training_run.phase_one(ctx)
    strategy, mlm = one.strategy, one.mlm

    chosen = data["train"][example]
    batch = collate([chosen], tokenizer.pad_token_id)
    mask_args = dict(mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    for _ in range(1000):
        masked_ids, labels = strategy(batch, ctx.mask_generator, **mask_args)
        if (labels != -100).any():
            break
    else:
        raise RuntimeError("the trained strategy selected no token of the sentence in 1000 draws")
    mlm.eval()  # no dropout: the saliency shown depends only on the model and the mask
    inputs = training_run.to_device({**batch, "input_ids": masked_ids}, ctx.device)
    with SaliencyProbe(mlm.input_embeddings()) as probe:
        loss = mlm(labels=labels.to(ctx.device), **ctx.backbone.model_inputs(inputs))
        loss.backward()
    saliency = probe.saliency(batch["input_ids"].to(ctx.device)).float().cpu()[0]
    mlm.zero_grad(set_to_none=True)

    tokens = token_table(chosen, tokenizer)
    ids = tokens["token_id"].to_numpy()
    special = tokens["special"].to_numpy()
    tokens["selected"] = (labels[0] != -100).numpy()
    tokens["saliency"] = saliency.numpy().astype(np.float64)
    tokens["weight"] = np.where(strategy.seen[ids] & ~special, strategy.weights[ids], np.nan)
    tokens["pi"] = np.where(special, np.nan, strategy.probs[ids])
    tokens["count"] = strategy.counts[ids]
    diagnostics = {"steps": strategy.steps, "sentence_mlm_loss": loss.detach().item(), **strategy.diagnostics(),
                   "kl_to_uniform": kl_to_uniform(strategy.probs, strategy.counts, strategy.p),
                   "kl_to_uniform_seen": kl_to_uniform(strategy.probs, strategy.counts, strategy.p, strategy.seen)}
    return SaliencyDemo(config, strategy, chosen, batch, tokens, diagnostics,
                        pd.DataFrame(one.loss_rows, columns=LOSS_COLUMNS))
