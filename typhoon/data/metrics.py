"""GLUE dev metrics with the official definitions, computed through the local ``evaluate`` module.

The definitions live in ``typhoon/glue_metric/glue_metric.py``, an ``evaluate`` metric module that is
loaded by path (no hub, works offline); this module keeps the small API the pipeline uses.
"""

from __future__ import annotations

import functools
from pathlib import Path

import evaluate
import numpy as np

from typhoon.data.glue_files import get_task

GLUE_METRIC_DIR = Path(__file__).resolve().parents[1] / "glue_metric"


@functools.cache
def _metric_module(task_name: str) -> evaluate.EvaluationModule:
    return evaluate.load(str(GLUE_METRIC_DIR), config_name=task_name, keep_in_memory=True)


def load_glue_metric(task: str) -> evaluate.EvaluationModule:
    """The ``evaluate`` module scoring ``task`` (loaded once per task; its inputs are kept in memory)."""
    return _metric_module(get_task(task).name)


def glue_metrics(task: str, labels, predictions) -> dict[str, float]:
    """The official metrics of a GLUE classification task, keyed ``accuracy``, ``f1``, ``mcc``."""
    result = load_glue_metric(task).compute(predictions=np.asarray(predictions, dtype=np.int64),
                                            references=np.asarray(labels, dtype=np.int64))
    return {name: float(value) for name, value in result.items()}


def majority_baseline(task: str, train_labels, dev_labels) -> float:
    """The task's primary metric for a predictor that always says the majority training class."""
    majority = np.bincount(np.asarray(train_labels)).argmax()
    return glue_metrics(task, dev_labels, np.full(len(dev_labels), majority))[get_task(task).metric]
