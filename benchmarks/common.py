"""What several benchmarks start from: minilm-l6 and the first MRPC training examples, on N threads."""

from __future__ import annotations

import torch

from typhoon.config import get_profile
from typhoon.training import run as training_run


def minilm_mrpc(threads: int, examples: int = 512) -> tuple[object, list[dict]]:
    """(backbone, tokenized training examples) with the ``cpu`` profile's settings, torch on ``threads``."""
    torch.set_num_threads(threads)
    config = get_profile("cpu").run_config(task="mrpc", backbone="minilm-l6", strategy="random", seed=0,
                                           max_train_examples=examples)
    inputs = training_run.load_inputs(config)
    return inputs.backbone, inputs.data["train"]
