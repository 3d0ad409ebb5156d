"""GLUE classification metrics as a local ``evaluate`` module: accuracy, F1 and Matthews correlation.

Loaded by path, which works offline: ``evaluate.load(".../typhoon/glue_metric", config_name="mrpc")``
(``typhoon.data.metrics.GLUE_METRIC_DIR`` is the folder). The configuration is the GLUE task; each task
reports ``accuracy`` and, where it is the official metric, ``f1`` (MRPC, QQP: F1 of the positive class)
or ``mcc`` (CoLA). The definitions are the official ones, written out in numpy rather than borrowed
from scikit-learn, so the tests can check them against scikit-learn. The file is self-contained
because ``evaluate`` copies it into its module cache and imports it from there.
"""

import datasets
import evaluate
import numpy as np

# The official metric of each GLUE classification task besides accuracy (typhoon.data.glue_files.GLUE_TASKS agrees;
# a test checks it).
PRIMARY_METRIC = {
    "cola": "mcc", "sst2": "accuracy", "mrpc": "f1", "qqp": "f1",
    "mnli": "accuracy", "qnli": "accuracy", "rte": "accuracy", "wnli": "accuracy",
}

_DESCRIPTION = "Dev-set metrics of the GLUE classification tasks (Wang et al., 2019), computed locally."
_INPUTS = """
Args:
    predictions: predicted class ids (int).
    references: gold class ids (int), in GLUE's label order.
Returns:
    accuracy, and f1 (mrpc, qqp) or mcc (cola), floats. MCC is 0 when a marginal is constant; F1 is 0
    when there is no true or predicted positive.
"""
_CITATION = """@inproceedings{wang2019glue,
  title={{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author={Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
  booktitle={International Conference on Learning Representations},
  year={2019}
}"""


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


class GlueMetric(evaluate.Metric):
    def _info(self):
        if self.config_name not in PRIMARY_METRIC:
            raise ValueError(f"unknown GLUE task {self.config_name!r} for the glue_metric module; "
                             f"config_name must be one of {sorted(PRIMARY_METRIC)}")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_INPUTS,
            features=datasets.Features({"predictions": datasets.Value("int64"),
                                        "references": datasets.Value("int64")}),
            format="numpy",
        )

    def _compute(self, predictions, references):
        predictions, references = np.asarray(predictions), np.asarray(references)
        if len(references) == 0:
            raise ValueError(f"GLUE {self.config_name}: no predictions to score")
        out = {"accuracy": accuracy(references, predictions)}
        primary = PRIMARY_METRIC[self.config_name]
        if primary == "f1":
            out["f1"] = binary_f1(references, predictions)
        if primary == "mcc":
            out["mcc"] = matthews_corrcoef(references, predictions)
        return out
