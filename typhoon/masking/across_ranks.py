"""One Typhoon state shared by the processes of a data-parallel run (``torch.distributed``: DDP through
transformers' ``Trainer``, ``accelerate launch``, ``torchrun`` or a loop of your own).

Each rank trains on its own shard of every step's batch. Were each to learn from its own shard alone, the
ranks' states, and the masks they draw, would drift apart, and none would be the algorithm's state. So
:func:`shared_update` gathers what the step's update needs from every rank before it is applied: per token
type, the sum of the saliency over its masked occurrences and over its visible ones, and the count of each
(:meth:`typhoon.masking.saliency.TyphoonMasking.batch_sums`, one (4, V) float64 tensor), added up across the
ranks with one ``all_reduce``. Every rank then applies the same sums to the same state: the states stay
equal, bit for bit, and equal the one-process update on the union of the ranks' batches up to the order in
which the sums are added (float64 rounding). Each rank still draws its masks with its own random stream.

The saliency a rank reads is the gradient of its own loss. DDP averages the ranks' gradients, so the loss the
run optimizes is the mean of the ranks' losses, whose gradient at this rank's inputs is the rank's saliency
divided by the number of ranks; that is what is summed. (transformers' ``Trainer`` scales each rank's loss
so that the mean is the loss over every masked token of the step: the sums are then exactly those of one
process given the whole step.)

A collective: every rank calls :func:`shared_update` once per optimizer step, after the step's backward
passes (gradient accumulation and ``no_sync`` micro-steps only add to what the step learns from). A rank
whose saliency is not finite (an fp16 overflow, whose step the optimizer skips) poisons the sums, so every
rank skips the update together instead of one waiting for the others.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def rank_and_size(group=None) -> tuple[int, int]:
    """(this process's rank, the number of processes) of ``group`` (the default: every process), (0, 1) where
    ``torch.distributed`` is not initialized."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def all_reduce_sum(tensor: torch.Tensor, group=None) -> torch.Tensor:
    """``tensor`` summed over the ranks of ``group``, in place (NCCL reduces on the GPU: a host tensor goes
    there and back)."""
    if dist.get_backend(group) == "nccl" and tensor.device.type != "cuda":
        on_gpu = tensor.to(torch.device("cuda", torch.cuda.current_device()))
        dist.all_reduce(on_gpu, op=dist.ReduceOp.SUM, group=group)
        return tensor.copy_(on_gpu)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor


def shared_update(strategy, batch: dict[str, torch.Tensor], selected: torch.Tensor, saliency: torch.Tensor,
                  group=None) -> bool:
    """One update of ``strategy`` (a learning one: ``needs_saliency``) from this rank's ``batch`` (original ids),
    ``selected`` positions and ``saliency``, and those of every other rank of ``group``; False if the step
    taught nothing (a saliency that is not finite, on any rank). In one process: ``strategy.update`` itself."""
    _, size = rank_and_size(group)
    finite = torch.isfinite(saliency).all()
    if size == 1:
        if not bool(finite):
            return False
        strategy.update(batch, selected, saliency)
        return True
    # the saliency of the loss DDP optimizes, the mean of the ranks' losses (see the module docstring)
    sums = strategy.batch_sums(batch, selected, saliency / size)
    sums += torch.where(finite.to(sums.device), 0.0, torch.nan)  # a rank's overflow reaches every rank
    all_reduce_sum(sums, group)
    if not bool(torch.isfinite(sums).all()):
        return False
    strategy.update_from_sums(sums)
    return True
