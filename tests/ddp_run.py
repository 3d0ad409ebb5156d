"""One data-parallel TyphoonTrainer run, for tests/test_hf_ranks.py: run by ``torchrun --nproc_per_node 2`` (gloo,
CPU), each rank writes what it saw into ``OUT/rank<r>.pt``.

    torchrun --standalone --nproc_per_node 2 tests/ddp_run.py OUT

What each rank records: the model's weights at the start (the same on both: DDP broadcasts rank 0's), every
micro-batch of every step (the padded batch and the masked inputs drawn from it), Typhoon's state after each
step; the masks its step stream and a plain collator draw on one batch that both ranks are given; and what a
plain Trainer given the Typhoon collator says at its first batch. Tiny-random with dropout off, MRPC, 2 micro-
batches a step (gradient accumulation, the first under no_sync), SGD without clipping: the test replays the
steps in one process on the union of the ranks' batches and compares.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

STEPS, ACCUMULATION, BATCH, EXAMPLES, LR, SEED = 3, 2, 4, 32, 1.0, 5


def main(out: Path) -> None:
    import datasets
    from transformers import Trainer, TrainingArguments

    from typhoon.data.glue_files import load_glue
    from typhoon.data.tokenizing import tokenize_glue
    from typhoon.hf import Masker, TyphoonTrainer, masking_collator
    from typhoon.models import load_backbone

    tiny = load_backbone("tiny-random")
    tokenizer = tiny.tokenizer
    raw = load_glue("mrpc")
    split = tokenize_glue(raw.__class__({"train": raw["train"].select(range(EXAMPLES))}), tokenizer, "mrpc",
                          max_length=128)["train"]
    train = datasets.Dataset.from_dict({"input_ids": split["input_ids"], "token_type_ids": split["token_type_ids"]})

    def model():
        built = tiny.mlm_model(seed=0).model
        for module in built.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        return built

    args = TrainingArguments(output_dir=str(out / "trainer"), per_device_train_batch_size=BATCH,
                             gradient_accumulation_steps=ACCUMULATION, max_steps=STEPS, max_grad_norm=0.0,
                             save_strategy="no", logging_strategy="no", report_to=[], disable_tqdm=True, seed=0,
                             use_cpu=True)  # without it, transformers trains each CPU process alone
    rank = args.process_index
    record = {"rank": rank, "world": args.world_size, "micro": [], "weights": [],
              "corpus": [{"input_ids": ids, "special_tokens_mask": special}
                         for ids, special in zip(split["input_ids"], split["special_tokens_mask"], strict=True)]}

    collator = masking_collator(tokenizer, "typhoon", seed=SEED)
    draw = collator.mask

    def recorded(batch, generator=None):
        inputs = draw(batch, generator)
        record["micro"].append({"batch": {k: v.clone() for k, v in batch.items()},
                                "inputs": {k: v.clone() for k, v in inputs.items()}})
        return inputs

    collator.mask = recorded
    net = model()
    record["start"] = {k: v.clone() for k, v in net.state_dict().items()}
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    from transformers import TrainerCallback

    class States(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            strategy = collator.strategy
            record["weights"].append(torch.from_numpy(strategy.state_dict()["weights"].copy()))

    trainer = TyphoonTrainer(model=net, args=args, train_dataset=train, data_collator=collator,
                             optimizers=(optimizer, schedule), callbacks=[States()])
    trainer.train()
    record["steps"] = collator.strategy.steps
    record["end"] = {k: v.detach().clone() for k, v in net.state_dict().items()}
    record["wrapped"] = type(trainer.model_wrapped).__name__

    # the same batch on both ranks: each rank's step stream (Typhoon, uniform before any step) and a plain
    # collator's keyed masks
    same = [{"input_ids": split["input_ids"][i], "token_type_ids": split["token_type_ids"][i]} for i in range(8)]
    fresh = masking_collator(tokenizer, "typhoon", seed=SEED)
    masker = Masker(fresh, model())
    masker.prepare_on(same)
    record["same_batch_typhoon"] = masker.draw(fresh(same))["labels"]
    record["same_batch_random"] = masking_collator(tokenizer, "random", seed=SEED)(same)["labels"]

    # the Typhoon collator in a plain Trainer: refused at the first batch, on every rank
    plain = Trainer(model=model(), args=args, train_dataset=train, data_collator=masking_collator(tokenizer, "typhoon"))
    try:
        plain.train()
        record["refused"] = None
    except RuntimeError as error:
        record["refused"] = str(error)
    torch.save(record, out / f"rank{rank}.pt")
    dist.barrier()  # both ranks have written before either ends


if __name__ == "__main__":
    main(Path(sys.argv[1]))
