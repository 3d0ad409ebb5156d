"""What several benchmarks start from: a backbone (minilm-l6 unless told) and the first MRPC training examples, on N
threads."""

from __future__ import annotations

import torch

from typhoon.profiles import resolve
from typhoon.training import run as training_run


def backbone_and_mrpc(threads: int, examples: int = 512, backbone: str = "minilm-l6") -> tuple[object, list[dict]]:
    """(backbone, tokenized training examples) with the ``cpu`` profile's settings, torch on ``threads``."""
    torch.set_num_threads(threads)
    config = resolve("cpu", dict(task="mrpc", backbone=backbone, strategy="random", seed=0,
                                 max_train_examples=examples))
    ctx = training_run.set_up(config, progress=False)
    return ctx.backbone, ctx.data["train"]
