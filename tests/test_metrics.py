"""GLUE metrics against scikit-learn on fixed predictions."""

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score
from sklearn.metrics import matthews_corrcoef as sk_mcc

from typhoon.metrics import accuracy, binary_f1, glue_metrics, majority_baseline, matthews_corrcoef


@pytest.mark.parametrize("seed", range(5))
def test_against_sklearn(seed):
    rng = np.random.default_rng(seed)
    labels, predictions = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    assert accuracy(labels, predictions) == pytest.approx(accuracy_score(labels, predictions), abs=1e-12)
    assert binary_f1(labels, predictions) == pytest.approx(f1_score(labels, predictions), abs=1e-12)
    assert matthews_corrcoef(labels, predictions) == pytest.approx(sk_mcc(labels, predictions), abs=1e-12)
    three = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    assert matthews_corrcoef(*three) == pytest.approx(sk_mcc(*three), abs=1e-12)


def test_degenerate_predictions():
    labels = np.array([0, 1, 1, 0])
    assert matthews_corrcoef(labels, np.ones(4)) == sk_mcc(labels, np.ones(4)) == 0.0
    assert binary_f1(labels, np.zeros(4)) == f1_score(labels, np.zeros(4), zero_division=0) == 0.0


def test_task_metrics_and_majority_baseline():
    assert set(glue_metrics("mrpc", [1, 0], [1, 1])) == {"accuracy", "f1"}
    assert set(glue_metrics("cola", [1, 0], [1, 1])) == {"accuracy", "mcc"}
    assert set(glue_metrics("rte", [1, 0], [1, 1])) == {"accuracy"}
    # MRPC dev: 279 positives of 408; always saying "equivalent" gives F1 = 2*279/(2*279+129)
    dev = [1] * 279 + [0] * 129
    assert majority_baseline("mrpc", [1, 1, 0], dev) == pytest.approx(2 * 279 / (2 * 279 + 129))
    assert majority_baseline("cola", [1, 1, 0], [1, 0, 1]) == 0.0
