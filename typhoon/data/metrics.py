"""GLUE dev metrics with the official definitions: accuracy, and F1 of the positive class (MRPC, QQP) or
Matthews correlation (CoLA), computed by ``evaluate`` with the package's own metric module
(typhoon/data/glue_metric.py, scikit-learn's definitions) loaded by path: offline, never from the hub.

``evaluate`` is imported here, when a run is scored, not when this module is imported: importing it imports
its evaluators and, with them, transformers' pipelines (about 0.7 s of CPU), which the command line and a
worker that has not finished a cell do not need.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from typhoon.data.glue_files import get_task

METRIC_SCRIPT = Path(__file__).with_name("glue_metric.py")


@functools.cache
def glue_metric(primary: str):
    """The ``evaluate`` metric for a task's primary metric (``accuracy``, ``f1``, ``mcc``), loaded once per process."""
    import evaluate

    return evaluate.load(str(METRIC_SCRIPT), primary, keep_in_memory=True)


def glue_metrics(task: str, labels, predictions) -> dict[str, float]:
    """The official metrics of a GLUE classification task, keyed ``accuracy`` and, where it is the task's
    primary metric, ``f1`` or ``mcc``."""
    spec = get_task(task)
    labels, predictions = np.asarray(labels, dtype=np.int64), np.asarray(predictions, dtype=np.int64)
    if labels.shape != predictions.shape or labels.ndim != 1:
        raise ValueError(f"GLUE {spec.name}: labels {labels.shape} and predictions {predictions.shape} must be "
                         "1-D and of one length")
    if len(labels) == 0:
        raise ValueError(f"GLUE {spec.name}: no predictions to score")
    return glue_metric(spec.metric).compute(predictions=predictions, references=labels)


def majority_baseline(task: str, train_labels, dev_labels) -> float:
    """The task's primary metric for a predictor that always says the majority training class."""
    majority = np.bincount(np.asarray(train_labels)).argmax()
    return glue_metrics(task, dev_labels, np.full(len(dev_labels), majority))[get_task(task).metric]
