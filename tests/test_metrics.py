"""GLUE metrics, computed through the local `evaluate` module, against scikit-learn on fixed predictions."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from typhoon.data.glue_files import GLUE_TASKS


@pytest.mark.parametrize("seed", range(5))
def test_against_sklearn(seed):
    from sklearn.metrics import accuracy_score, f1_score
    from sklearn.metrics import matthews_corrcoef as sk_mcc

    from typhoon.data.metrics import glue_metrics
    rng = np.random.default_rng(seed)
    labels, predictions = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    mrpc, cola = glue_metrics("mrpc", labels, predictions), glue_metrics("cola", labels, predictions)
    assert mrpc["accuracy"] == cola["accuracy"] == pytest.approx(accuracy_score(labels, predictions), abs=1e-12)
    assert mrpc["f1"] == pytest.approx(f1_score(labels, predictions), abs=1e-12)
    assert cola["mcc"] == pytest.approx(sk_mcc(labels, predictions), abs=1e-12)


def test_multiclass_mcc_against_sklearn():
    """The module's MCC is the general (multi-class) definition, though CoLA only needs two classes."""
    from sklearn.metrics import matthews_corrcoef as sk_mcc

    from typhoon.data.metrics import load_glue_metric
    module = sys.modules[type(load_glue_metric("cola")).__module__]  # the copy evaluate imported
    rng = np.random.default_rng(7)
    three = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    assert module.matthews_corrcoef(*three) == pytest.approx(sk_mcc(*three), abs=1e-12)


def test_degenerate_predictions():
    from sklearn.metrics import f1_score
    from sklearn.metrics import matthews_corrcoef as sk_mcc

    from typhoon.data.metrics import glue_metrics
    labels = np.array([0, 1, 1, 0])
    assert glue_metrics("cola", labels, np.ones(4, int))["mcc"] == sk_mcc(labels, np.ones(4)) == 0.0
    assert glue_metrics("mrpc", labels, np.zeros(4, int))["f1"] == f1_score(labels, np.zeros(4), zero_division=0) == 0.0


def test_task_metrics_and_majority_baseline():
    from typhoon.data.metrics import glue_metrics, majority_baseline
    assert set(glue_metrics("mrpc", [1, 0], [1, 1])) == {"accuracy", "f1"}
    assert set(glue_metrics("cola", [1, 0], [1, 1])) == {"accuracy", "mcc"}
    assert set(glue_metrics("rte", [1, 0], [1, 1])) == {"accuracy"}
    # MRPC dev: 279 positives of 408; always saying "equivalent" gives F1 = 2*279/(2*279+129)
    dev = [1] * 279 + [0] * 129
    assert majority_baseline("mrpc", [1, 1, 0], dev) == pytest.approx(2 * 279 / (2 * 279 + 129))
    assert majority_baseline("cola", [1, 1, 0], [1, 0, 1]) == 0.0


def test_module_covers_every_task_with_its_official_metric():
    from typhoon.data.metrics import load_glue_metric
    module = sys.modules[type(load_glue_metric("mrpc")).__module__]
    assert module.PRIMARY_METRIC == {name: spec.metric for name, spec in GLUE_TASKS.items()}


def test_unknown_task_is_refused():
    import evaluate

    from typhoon.data.metrics import GLUE_METRIC_DIR
    with pytest.raises(ValueError, match="unknown GLUE task 'stsb'.*cola"):
        evaluate.load(str(GLUE_METRIC_DIR), config_name="stsb")


@pytest.mark.slow  # a fresh interpreter that imports evaluate
def test_loads_by_path_offline_in_a_fresh_cache(tmp_path):
    """evaluate.load(<folder>) needs no hub: a new process, an empty Hugging Face cache, the hub off."""
    from sklearn.metrics import matthews_corrcoef as sk_mcc

    from typhoon.data.metrics import GLUE_METRIC_DIR
    code = (f"import evaluate, json; m = evaluate.load({str(GLUE_METRIC_DIR)!r}, config_name='cola'); "
            "print(json.dumps(m.compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1])))")
    env = os.environ | {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                        "HF_EVALUATE_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == pytest.approx({"accuracy": 0.75, "mcc": sk_mcc([1, 0, 0, 1], [1, 0, 1, 1])}, abs=1e-12)
