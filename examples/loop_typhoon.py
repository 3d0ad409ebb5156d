"""Masked-LM training in a plain PyTorch loop with a masking strategy of the Typhoon bundle (nanoGPT's shape).

    python examples/loop_typhoon.py --model tiny-random --task mrpc --strategy typhoon --max-steps 20
    torchrun --nproc_per_node 2 examples/loop_typhoon.py --model tiny-random --max-steps 20      # data-parallel
    python examples/loop_typhoon.py --model tiny-random --max-steps 30 --resume                 # 10 steps more

The same collator and Typhoon state as ``TyphoonTrainer`` (examples/hf_trainer_typhoon.py), with the loop in
view: the collator pads, ``masker.draw`` masks each batch from the current state, the model steps, and
``masker.learn`` updates the state from that step's own backward (under torchrun: from every rank's, one
all-reduce). ``--model``, ``--task`` / ``--train-file``, ``--strategy`` and ``--mlm-probability`` are the
Trainer example's. A checkpoint is written at the end into ``--output-dir`` (by default outside the repository:
~/.cache/typhoon/loop, or under $XDG_CACHE_HOME): the model and optimizer, and each rank's masking state and
random streams; ``--resume`` goes on from it with the masks, data order and dropout of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from example_inputs import add_arguments, load_model, load_texts
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

from typhoon.hf import Masker, masking_collator


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, "loop")
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--log-every", type=int, default=10)
    args = parser.parse_args(argv)

    # -- one process, or one per rank under torchrun (gloo on CPUs, NCCL on GPUs) ----------------------------
    ddp = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if ddp:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if ddp else (0, 1)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")
    out = Path(args.output_dir)

    # -- model, masks, data --------------------------------------------------------------------------------
    torch.manual_seed(args.seed)  # the same start on every rank (DDP also sends rank 0's weights to the others)
    model, tokenizer = load_model(args.model)  # a bad strategy below is refused before any data is read
    collator = masking_collator(tokenizer, args.strategy, mlm_probability=args.p, seed=args.seed)
    model.to(device)
    masker = Masker(collator, model)  # the collator only pads from now on; masks come from masker.draw
    texts = load_texts(args)
    examples = [{"input_ids": ids} for ids in tokenizer(texts, truncation=True, max_length=args.max_length)["input_ids"]]
    masker.prepare_on(examples)  # Typhoon's budget holds over the whole training text (every rank counts it all)
    sampler = (DistributedSampler(examples, seed=args.seed) if ddp
               else RandomSampler(examples, generator=torch.Generator().manual_seed(args.seed)))
    # the loader's own generator: a new epoch's iterator then draws nothing from torch's, which dropout draws from
    loader = DataLoader(examples, batch_size=args.batch_size, sampler=sampler, collate_fn=collator, drop_last=True,
                        generator=torch.Generator().manual_seed(args.seed))
    trained = DistributedDataParallel(model) if ddp else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    # -- resume: the model and optimizer (one copy), each rank's masks and dropout stream ---------------------
    step = 0
    if args.resume:
        saved = torch.load(out / "checkpoint.pt", map_location=device, weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
        mine = torch.load(out / f"masking_{rank}.pt", weights_only=False)
        masker.load_state_dict(mine["masking"], where=f"{out}/masking_{rank}.pt")
        torch.set_rng_state(mine["torch_rng"])

    # -- the loop ------------------------------------------------------------------------------------------
    model.train()
    per_epoch = len(loader)
    epoch, skip = divmod(step, per_epoch)  # where an uninterrupted run would be
    started, first = time.perf_counter(), step
    while step < args.max_steps:
        if ddp:
            sampler.set_epoch(epoch)
        else:
            sampler.generator.manual_seed(args.seed + epoch)
        for batch in loader:
            if skip:  # the batches a resumed run has trained on already (padding only: no random number drawn)
                skip -= 1
                continue
            inputs = masker.draw({k: v.to(device) for k, v in batch.items()})  # masks from the current state
            loss = trained(**inputs).loss
            loss.backward()
            masker.learn()  # the saliency of this backward: one update, the same on every rank
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if rank == 0 and (step % args.log_every == 0 or step == args.max_steps):
                seconds = (time.perf_counter() - started) / (step - first)
                print(f"step {step}: loss {loss.item():.4f} ({seconds:.2f} s/step)", flush=True)
            if step == args.max_steps:
                break
        epoch += 1

    # -- checkpoint ----------------------------------------------------------------------------------------
    out.mkdir(parents=True, exist_ok=True)
    if rank == 0:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                   out / "checkpoint.pt")
    torch.save({"masking": masker.state_dict(), "torch_rng": torch.get_rng_state()}, out / f"masking_{rank}.pt")
    if rank == 0:
        strategy = collator.strategy
        learnt = f", {strategy.steps} Typhoon updates" if strategy.needs_saliency else ""
        print(f"{args.strategy} on {args.model}, {world} process(es): {step} steps{learnt}; checkpoint in {out}")
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
