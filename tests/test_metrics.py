"""GLUE metrics (typhoon.data.metrics, through `evaluate` and the package's metric module) against
scikit-learn on random predictions, exactly, and by hand."""

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO
from sklearn.metrics import accuracy_score, f1_score
from sklearn.metrics import matthews_corrcoef as sk_mcc

from typhoon.data.metrics import glue_metric, glue_metrics, majority_baseline


@pytest.mark.parametrize("seed", range(20))
def test_evaluate_equals_sklearn_on_random_predictions(seed):
    """The same floats as scikit-learn's, bit for bit (the records keep their values), at any length, class
    balance and accuracy."""
    rng = np.random.default_rng(seed)
    n, positive, agree = int(rng.integers(1, 1100)), rng.uniform(0.05, 0.95), rng.uniform(0.3, 1.0)
    labels = (rng.random(n) < positive).astype(int)
    predictions = np.where(rng.random(n) < agree, labels, 1 - labels)
    mrpc, cola = glue_metrics("mrpc", labels, predictions), glue_metrics("cola", labels, predictions)
    assert mrpc["accuracy"] == cola["accuracy"] == accuracy_score(labels, predictions)
    assert mrpc["f1"] == f1_score(labels, predictions, zero_division=0)
    assert cola["mcc"] == sk_mcc(labels, predictions)
    assert all(type(value) is float for value in [*mrpc.values(), *cola.values()])


def test_multiclass_mcc_against_sklearn():
    """MCC is the general (multi-class) definition, though CoLA only needs two classes."""
    rng = np.random.default_rng(7)
    labels, predictions = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    scores = glue_metric("mcc").compute(predictions=predictions, references=labels)
    assert scores == {"accuracy": accuracy_score(labels, predictions), "mcc": sk_mcc(labels, predictions)}


@pytest.mark.slow  # a fresh interpreter that imports evaluate
def test_the_metric_module_is_loaded_by_path_offline(tmp_path):
    """A fresh process with an empty hub home, offline and with no proxy that reaches anything, scores a run:
    the metric comes from the package's file, never from the hub, and `evaluate` is imported only then."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "TYPHOON_"))}
    env.update(PYTHONPATH=str(REPO), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    code = ("import sys; from typhoon.data.metrics import glue_metrics; before = 'evaluate' in sys.modules; "
            "print(before, glue_metrics('mrpc', [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "False"
    assert "'f1': 0.6666666666666666" in done.stdout


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
