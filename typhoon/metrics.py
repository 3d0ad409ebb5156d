"""GLUE dev metrics with the official definitions, computed offline (no hub metric scripts)."""

from __future__ import annotations

import numpy as np

from typhoon.data import get_task


def accuracy(labels, predictions) -> float:
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions))


def binary_f1(labels, predictions, positive: int = 1) -> float:
    """F1 of the positive class (GLUE's MRPC/QQP F1); 0 when there is no true or predicted positive."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    tp = np.sum((predictions == positive) & (labels == positive))
    fp = np.sum((predictions == positive) & (labels != positive))
    fn = np.sum((predictions != positive) & (labels == positive))
    return float(2 * tp / (2 * tp + fp + fn)) if tp else 0.0


def matthews_corrcoef(labels, predictions) -> float:
    """Matthews correlation (CoLA's metric), defined as 0 when a marginal is constant."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.union1d(labels, predictions)
    confusion = (labels[:, None] == classes[None, :]).T.astype(float) @ (predictions[:, None] == classes[None, :])
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)  # true and predicted class totals
    n, correct = confusion.sum(), np.trace(confusion)
    denominator = np.sqrt((n**2 - p @ p) * (n**2 - t @ t))
    return float((correct * n - t @ p) / denominator) if denominator else 0.0


def glue_metrics(task: str, labels, predictions) -> dict[str, float]:
    """The official metrics of a GLUE classification task, keyed ``accuracy``, ``f1``, ``mcc``."""
    spec = get_task(task)
    out = {"accuracy": accuracy(labels, predictions)}
    if spec.metric == "f1":
        out["f1"] = binary_f1(labels, predictions)
    if spec.metric == "mcc":
        out["mcc"] = matthews_corrcoef(labels, predictions)
    return out


def majority_baseline(task: str, train_labels, dev_labels) -> float:
    """The task's primary metric for a predictor that always says the majority training class."""
    majority = np.bincount(np.asarray(train_labels)).argmax()
    return glue_metrics(task, dev_labels, np.full(len(dev_labels), majority))[get_task(task).metric]
