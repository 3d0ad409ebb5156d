"""MLM step with the gathered head (logits only at selected positions) vs the stock full-vocabulary head.

    python benchmarks/bench_mlm_head.py [--threads 2] [--repeats 7] [--precision fp32|bf16]
                                        [--attention eager|sdpa] [--dropout fast|native] [--backbone minilm-l6]

Same model (MiniLM-L6), same masked MRPC batches (B=32, L=64, p=0.15): forward + backward + AdamW step
in training mode (dropout on), with the pipeline's CPU kernels (eager attention, fast dropout) unless
--attention / --dropout say otherwise. Prints the median step time of
- the stock full-vocabulary head and the gathered head on the same encoder (the head's own speed-up),
- the encoder alone (the ceiling that any head change could reach),
- the stock model as transformers ships it (SDPA attention, native dropout, full head): the step the
  pipeline replaces.
The issue's target is >= 2.5x on CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from typhoon.data.batching import collate
from typhoon.data.glue_files import load_glue
from typhoon.data.tokenizing import tokenize_glue
from typhoon.masking import get_strategy
from typhoon.models.backbones import load_backbone


def batches(backbone, n: int, size: int = 32, length: int = 64):
    raw = load_glue("mrpc")
    data = tokenize_glue(raw.__class__(train=raw["train"].select(range(n * size))), backbone.tokenizer, "mrpc", length)
    rows = data["train"].to_list()
    masker, gen = get_strategy("random", p=0.15), torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        batch = collate(rows[i * size:(i + 1) * size], backbone.tokenizer.pad_token_id)
        pad = length - batch["input_ids"].shape[1]  # pad every batch to exactly L
        batch = {k: torch.nn.functional.pad(v, (0, pad), value=0 if k != "special_tokens_mask" else 1)
                 if v.ndim == 2 else v for k, v in batch.items()}
        batch["input_ids"], batch["mlm_labels"] = masker(batch, gen, mask_token_id=backbone.tokenizer.mask_token_id,
                                                         vocab_size=len(backbone.tokenizer))
        out.append(batch)
    return out


def time_steps(step, data, repeats: int) -> float:
    for batch in data[:2]:
        step(batch)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in data:
            step(batch)
        times.append((time.perf_counter() - start) / len(data))
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--attention", choices=["eager", "sdpa"], default="eager",
                        help="attention kernel of the compared models (the pipeline uses eager on CPU)")
    parser.add_argument("--dropout", choices=["fast", "native"], default="fast",
                        help="dropout kernel of the compared models (the pipeline uses fast on CPU)")
    parser.add_argument("--backbone", default="minilm-l6", help="a registered backbone (default minilm-l6)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    backbone = load_backbone(args.backbone)
    data = batches(backbone, args.batches)
    torch.manual_seed(0)  # dropout
    mlm = backbone.mlm_model(attention=args.attention, fast_dropout=args.dropout == "fast").train()
    optimizer = torch.optim.AdamW(mlm.parameters(), lr=1e-5, fused=True)
    shipped = backbone.mlm_model().train()  # transformers' defaults: SDPA attention, native dropout
    shipped_optimizer = torch.optim.AdamW(shipped.parameters(), lr=1e-5, fused=True)
    bf16 = args.precision == "bf16"

    inputs = backbone.model_inputs

    def training_step(loss_of, opt):
        """One training step: forward (loss_of(batch)) under autocast, backward, AdamW step."""
        def step(b):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = loss_of(b)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    gathered = training_step(lambda b: mlm(labels=b["mlm_labels"], **inputs(b)), optimizer)
    stock = training_step(lambda b: mlm.model(labels=b["mlm_labels"], **inputs(b)).loss, optimizer)
    stock_as_shipped = training_step(lambda b: shipped.model(labels=b["mlm_labels"], **inputs(b)).loss,
                                     shipped_optimizer)
    # no head at all: the floor any head change can reach
    encoder_only = training_step(lambda b: mlm.encoder(**inputs(b)).last_hidden_state.float().square().mean(),
                                 optimizer)

    t_stock = time_steps(stock, data, args.repeats)
    t_gathered = time_steps(gathered, data, args.repeats)
    t_encoder = time_steps(encoder_only, data, args.repeats)
    print(f"{args.backbone} threads={args.threads} precision={args.precision} attention={args.attention} dropout={args.dropout} "
          "B=32 L=64 p=0.15, training mode")
    print(f"stock full-vocabulary head : {t_stock * 1000:8.1f} ms/step")
    print(f"gathered head (ours)       : {t_gathered * 1000:8.1f} ms/step")
    print(f"encoder only, no head      : {t_encoder * 1000:8.1f} ms/step")
    print(f"head speed-up, same encoder: {t_stock / t_gathered:8.2f}x (ceiling without any head: "
          f"{t_stock / t_encoder:.2f}x)")
    t_shipped = time_steps(stock_as_shipped, data, args.repeats)
    print(f"stock model as shipped     : {t_shipped * 1000:8.1f} ms/step "
          f"({shipped.model.config._attn_implementation} attention, native dropout, full head)")
    print(f"our step vs shipped        : {t_shipped / t_gathered:8.2f}x")


if __name__ == "__main__":
    main()
