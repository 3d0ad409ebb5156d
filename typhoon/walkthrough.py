"""Helpers for the setup and masking walkthrough notebooks (``notebooks/00_setup``, ``01_masking_walkthrough``).

Small, readable views on what the rest of the package does: an environment / data / backbone report,
a token table with word ids, the tokens each masking strategy selects (as HTML), empirical masking
rates against the budget p, and Typhoon's saliency on a real sentence after a few real MLM steps.
Nothing here re-implements masking, data loading or training: it calls :mod:`typhoon.data`,
:mod:`typhoon.masking`, :mod:`typhoon.models` and :mod:`typhoon.pipeline`.
"""

from __future__ import annotations

import html
import os
import platform
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from typhoon import batch, pipeline, plots
from typhoon.config import RunConfig
from typhoon.data import GLUE_DIR_ENV, collate, get_task, load_glue, locate_glue, token_counts
from typhoon.masking import MaskingStrategy, SaliencyProbe, get_strategy, kl_to_uniform, maskable_positions
from typhoon.models import BACKBONES, load_backbone, minilm_dir

__all__ = [
    "SaliencyDemo",
    "backbone_report",
    "batch_row",
    "data_report",
    "draw_selections",
    "environment_report",
    "load_examples",
    "plot_rates",
    "plot_saliency",
    "prepared_strategies",
    "rate_table",
    "saliency_demo",
    "selection_html",
    "token_table",
]


# --------------------------------------------------------------------------------------------------
# Setup reports


def environment_report() -> pd.DataFrame:
    """Library versions, device, bf16 support, attention and dropout kernels, threads, as a table (item, value)."""
    config = RunConfig(device="auto", precision="auto", attention="auto", dropout="auto")
    device = pipeline.resolve_device(config)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    items = {
        **pipeline.library_versions(),
        "platform": platform.platform(),
        "git commit": pipeline.git_commit() or "unknown",
        "device": f"{device.type} ({device_name})",
        "cuda available": torch.cuda.is_available(),
        "bf16 autocast (precision=auto)": pipeline.use_bf16(config, device),
        "attention kernel (attention=auto)": pipeline.resolve_attention(config, device),
        "dropout kernel (dropout=auto)": pipeline.resolve_dropout(config, device),
        "cpu cores (usable)": batch.usable_cores(),
        "torch threads": torch.get_num_threads(),
        "torch interop threads": torch.get_num_interop_threads(),
    }
    for var in ("OMP_NUM_THREADS", GLUE_DIR_ENV, "HF_HUB_OFFLINE", "HF_HOME"):
        items[f"${var}"] = os.environ.get(var, "(unset)")
    return pd.DataFrame({"item": list(items), "value": [str(v) for v in items.values()]})


def glue_source(task: str, data_dir: str | os.PathLike | None = None) -> str:
    """Where :func:`typhoon.data.load_glue` reads ``task`` from: a local folder (and which) or the hub."""
    return str(locate_glue(task, data_dir))


def data_report(tasks: Sequence[str], data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per (task, split): source, size, label counts and the majority-class share."""
    rows = []
    for task in tasks:
        spec = get_task(task)
        source = glue_source(task, data_dir)
        for split, ds in load_glue(task, data_dir).items():
            counts = Counter(ds["label"])
            labelled = -1 not in counts
            n = len(ds)
            balance = ", ".join(f"{name} {counts.get(i, 0)} ({counts.get(i, 0) / n:.1%})"
                                for i, name in enumerate(spec.label_names)) if labelled else "unlabelled"
            rows.append({"task": spec.name, "split": split, "examples": n, "metric": spec.metric,
                         "labels": balance,
                         "majority_share": max(counts.values()) / n if labelled else float("nan"),
                         "source": source})
    return pd.DataFrame(rows)


def backbone_source(name: str) -> str:
    """Where a registered backbone comes from: a local package folder, built in memory, or a hub id."""
    spec = BACKBONES[name]
    if spec.source is None:
        return f"built in memory (vocabulary of {minilm_dir()})"
    if spec.source == "<minilm>":
        return str(minilm_dir())
    return f"hub: {spec.source}"


def _hub_cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def backbone_report() -> pd.DataFrame:
    """Every backbone of ``typhoon.models.BACKBONES``: source, whether it loads offline, and if it is available now.

    Nothing is loaded: a local folder must exist, a hub backbone must be in the Hugging Face cache
    (or the hub reachable when the run starts).
    """
    rows = []
    for name, spec in BACKBONES.items():
        if spec.source is None or spec.source == "<minilm>":
            available = minilm_dir().is_dir()
        else:
            available = _hub_cached(spec.source)
        rows.append({"backbone": name, "offline": spec.offline, "available_now": available,
                     "source": backbone_source(name), "description": spec.description})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# Tokens, word ids and strategies' selections


def load_examples(task: str, tokenizer, n: int = 64, split: str = "train", max_length: int = 128) -> list[dict]:
    """The first ``n`` tokenized examples of a split (contract keys), via :func:`typhoon.pipeline.prepare_data`."""
    if split not in ("train", "validation"):
        raise ValueError(f"split must be 'train' or 'validation', got {split!r}")
    caps = {"train": n, "validation": 1} if split == "train" else {"train": 1, "validation": n}
    config = RunConfig(task=task, max_length=max_length, max_train_examples=caps["train"],
                       max_eval_examples=caps["validation"])
    return pipeline.prepare_data(config, tokenizer)[split]


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
    counts = token_counts([x["input_ids"] for x in examples], [x["special_tokens_mask"] for x in examples],
                          vocab_size)
    strategies = {}
    for name in names:
        strategies[name] = get_strategy(name, p=p)
        strategies[name].prepare(counts)
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
    ``data-selected="1"`` and the strategy's colour (``typhoon.plots.strategy_palette``).
    """
    ids = row["input_ids"].tolist()
    real = row["attention_mask"].bool().tolist() if "attention_mask" in row else [True] * len(ids)
    special = row["special_tokens_mask"].bool().tolist()
    tokens = tokenizer.convert_ids_to_tokens(ids)
    palette = plots.strategy_palette(selections)
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


def plot_rates(table: pd.DataFrame, out_path: str | os.PathLike) -> list[Path]:
    """Left: empirical rate (mean ± sd between draws) against the budget p. Right: the sd between draws."""
    palette = plots.strategy_palette(table["strategy"])
    fig = plots._new_figure(8.4, 3.6)
    ax_rate, ax_sd = fig.subplots(1, 2)
    top = float(max(table["p"].max(), (table["mean_rate"] + table["sd_rate"]).max()))
    ax_rate.plot([0, top], [0, top], color="black", lw=0.8, ls="--", label="rate = p")
    n_strategies = table["strategy"].nunique()
    for i, (name, sub) in enumerate(table.sort_values("p").groupby("strategy", sort=False)):
        offset = (i - (n_strategies - 1) / 2) * 0.004  # keep the error bars apart
        ax_rate.errorbar(sub["p"] + offset, sub["mean_rate"], yerr=sub["sd_rate"], marker="o", ms=4, capsize=3,
                         color=palette[name], label=name)
        ax_sd.plot(sub["p"], sub["sd_rate"], marker="o", ms=4, color=palette[name], label=name)
    ax_rate.set_xlabel("budget p")
    ax_rate.set_ylabel("share of maskable tokens selected")
    ax_rate.legend(fontsize=8)
    ax_rate.set_title(f"Mean rate over {int(table['draws'].iloc[0])} draws (bars: sd)", fontsize=9)
    ax_sd.set_xlabel("budget p")
    ax_sd.set_ylabel("sd of the rate between draws")
    ax_sd.set_title("How much the masked share varies from draw to draw", fontsize=9)
    return plots.save_figure(fig, out_path)


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

    Training is :func:`typhoon.pipeline.adapt_mlm` on the first ``steps * batch_size`` training examples
    (one epoch: every step masks with Typhoon, reads the saliency with :class:`SaliencyProbe` and calls
    ``strategy.update``). The sentence (training example ``example``, so its token types have weights)
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
    torch.manual_seed(seed)
    rng, generator = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    backbone = load_backbone(backbone_name)
    tokenizer = backbone.tokenizer
    data = pipeline.prepare_data(config, tokenizer)
    strategy = get_strategy("typhoon", **config.strategy_params())
    strategy.prepare(token_counts([x["input_ids"] for x in data["train"]],
                                  [x["special_tokens_mask"] for x in data["train"]], len(tokenizer)))
    device = pipeline.resolve_device(config)
    mlm = backbone.mlm_model(seed=seed).to(device)
    loss_rows, _ = pipeline.adapt_mlm(config, backbone, mlm, strategy, data, device, False, rng, generator,
                                      progress=False)

    chosen = data["train"][example]
    batch = collate([chosen], tokenizer.pad_token_id)
    mask_args = dict(mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    for _ in range(1000):
        masked_ids, labels = strategy(batch, generator, **mask_args)
        if (labels != -100).any():
            break
    else:
        raise RuntimeError("the trained strategy selected no token of the sentence in 1000 draws")
    mlm.eval()  # no dropout: the saliency shown depends only on the model and the mask
    inputs = pipeline.to_device({**batch, "input_ids": masked_ids}, device)
    with SaliencyProbe(mlm.input_embeddings()) as probe:
        loss = mlm(labels=labels.to(device), **pipeline.model_inputs(inputs, backbone.family))
        loss.backward()
    saliency = probe.saliency(batch["input_ids"].to(device)).float().cpu()[0]
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
                        pd.DataFrame(loss_rows, columns=["step", "epoch", "split", "loss"]))


MASKED_COLOUR, VISIBLE_COLOUR, PI_COLOUR = "#d55e00", "#999999", "#0072b2"  # colorblind-safe


def plot_saliency(tokens: pd.DataFrame, p: float, out_path: str | os.PathLike) -> list[Path]:
    """Two bar panels over a sentence's non-special tokens: saliency (masked vs visible) and pi (line at p)."""
    df = tokens[~tokens["special"]].reset_index(drop=True)
    colors = [MASKED_COLOUR if s else VISIBLE_COLOUR for s in df["selected"]]
    fig = plots._new_figure(max(5.0, 0.24 * len(df) + 1.5), 5.0)
    ax_s, ax_p = fig.subplots(2, 1, sharex=True)
    x = np.arange(len(df))
    ax_s.bar(x, df["saliency"], color=colors)
    ax_s.axhline(0, color="black", lw=0.6)
    visible = df.loc[~df["selected"], "saliency"].abs()
    if (visible > 0).any():  # masked positions' saliency is orders of magnitude larger: symlog shows both
        ax_s.set_yscale("symlog", linthresh=float(visible[visible > 0].median()))
    ax_s.set_ylabel("saliency s_i (symlog)")
    ax_s.set_title("Saliency <dL/dx_i, W[t_i]> (orange: masked in this draw, grey: visible)", fontsize=9)
    ax_p.bar(x, df["pi"], color=PI_COLOUR)
    ax_p.axhline(p, color="black", lw=0.8, ls="--", label=f"p = {p:g}")
    ax_p.set_ylabel("masking probability π")
    ax_p.legend(fontsize=8)
    ax_p.set_xticks(x, df["token"], rotation=90, fontsize=7)
    return plots.save_figure(fig, out_path)
