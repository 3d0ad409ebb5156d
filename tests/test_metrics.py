"""GLUE metrics (typhoon.data.metrics) against scikit-learn on fixed predictions, and by hand."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score
from sklearn.metrics import matthews_corrcoef as sk_mcc

from typhoon.data.metrics import glue_metrics, majority_baseline, matthews_corrcoef


@pytest.mark.parametrize("seed", range(5))
def test_against_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels, predictions = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    mrpc, cola = glue_metrics("mrpc", labels, predictions), glue_metrics("cola", labels, predictions)
    assert mrpc["accuracy"] == cola["accuracy"] == pytest.approx(accuracy_score(labels, predictions), abs=1e-12)
    assert mrpc["f1"] == pytest.approx(f1_score(labels, predictions), abs=1e-12)
    assert cola["mcc"] == pytest.approx(sk_mcc(labels, predictions), abs=1e-12)


def test_multiclass_mcc_against_sklearn():
    """MCC is the general (multi-class) definition, though CoLA only needs two classes."""
    rng = np.random.default_rng(7)
    three = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    assert matthews_corrcoef(*three) == pytest.approx(sk_mcc(*three), abs=1e-12)


def test_by_hand():
    # labels 1 1 0 0 1, predictions 1 0 0 1 1: tp 2, fp 1, fn 1, tn 1
    labels, predictions = [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]
    assert glue_metrics("mrpc", labels, predictions) == pytest.approx({"accuracy": 3 / 5, "f1": 4 / 6})
    # MCC = (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (2 - 1) / sqrt(3*3*2*2) = 1/6
    assert glue_metrics("cola", labels, predictions)["mcc"] == pytest.approx(1 / 6)


def test_degenerate_predictions():
    labels = np.array([0, 1, 1, 0])
    assert glue_metrics("cola", labels, np.ones(4, int))["mcc"] == sk_mcc(labels, np.ones(4)) == 0.0
    assert glue_metrics("mrpc", labels, np.zeros(4, int))["f1"] == f1_score(labels, np.zeros(4), zero_division=0) == 0.0


def test_task_metrics_and_majority_baseline():
    assert set(glue_metrics("mrpc", [1, 0], [1, 1])) == {"accuracy", "f1"}
    assert set(glue_metrics("cola", [1, 0], [1, 1])) == {"accuracy", "mcc"}
    assert set(glue_metrics("rte", [1, 0], [1, 1])) == {"accuracy"}
    # MRPC dev: 279 positives of 408; always saying "equivalent" gives F1 = 2*279/(2*279+129)
    dev = [1] * 279 + [0] * 129
    assert majority_baseline("mrpc", [1, 1, 0], dev) == pytest.approx(2 * 279 / (2 * 279 + 129))
    assert majority_baseline("cola", [1, 1, 0], [1, 0, 1]) == 0.0


@pytest.mark.parametrize("task, labels, predictions, message", [
    ("stsb", [1, 0], [1, 1], "unknown GLUE task 'stsb'.*cola"),
    ("mrpc", [], [], "mrpc: no predictions to score"),
    ("cola", [1, 0, 1], [1, 0], r"cola: labels \(3,\) and predictions \(2,\)"),
])
def test_bad_input_is_refused(task, labels, predictions, message):
    with pytest.raises(ValueError, match=message):
        glue_metrics(task, labels, predictions)
