"""The GLUE metric as an ``evaluate`` module, loaded by path (``evaluate.load(<this file>, "f1")``), never
from the hub: accuracy, and with it the task's primary metric, its config name (a task's ``TaskSpec.metric``):
``f1``, F1 of the positive class (MRPC, QQP), or ``mcc``, Matthews correlation (CoLA); each is
scikit-learn's (the definitions of the official GLUE metric script). The file is a script that
``evaluate`` copies and imports on its own, so it imports nothing from this package; typhoon.data.metrics
loads it where a run is scored."""

import datasets
import evaluate
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef


class GlueMetric(evaluate.Metric):
    """Accuracy and the primary metric its config name says (``accuracy``, ``f1``, ``mcc``) of integer labels
    and predictions."""

    def _info(self):
        return evaluate.MetricInfo(
            description="GLUE dev metrics: accuracy, and F1 (MRPC, QQP) or Matthews correlation (CoLA).",
            citation="Wang et al., GLUE: A Multi-Task Benchmark and Analysis Platform for NLU, ICLR 2019.",
            inputs_description="predictions and references: integer class labels of one length.",
            features=datasets.Features({"predictions": datasets.Value("int64"),
                                        "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references):
        scores = {"accuracy": float(accuracy_score(references, predictions))}
        if self.config_name == "f1":
            scores["f1"] = float(f1_score(references, predictions, zero_division=0))
        elif self.config_name == "mcc":
            scores["mcc"] = float(matthews_corrcoef(references, predictions))
        elif self.config_name != "accuracy":
            raise ValueError(f"GLUE metric {self.config_name!r}: expected accuracy, f1 or mcc")
        return scores
