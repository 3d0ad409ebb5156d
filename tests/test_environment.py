"""typhoon.report.setup_tables: the setup report (versions and device, GLUE data, backbones)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from typhoon.data.glue_files import BUNDLED_GLUE_DIR, load_glue, locate_glue

# Official GLUE split sizes (train, dev, test): the local files must be the official ones.
GLUE_SIZES = {"mrpc": (3668, 408, 1725), "cola": (8551, 1043, 1063)}


def test_environment_report_names_versions_and_threads():
    import datasets
    import transformers

    import typhoon
    from typhoon.report import setup_tables

    report = setup_tables.environment_report().set_index("item")["value"]
    assert report["torch"] == torch.__version__
    assert report["transformers"] == transformers.__version__
    assert report["datasets"] == datasets.__version__
    assert report["typhoon"] == typhoon.__version__
    assert report["torch threads"] == str(torch.get_num_threads())
    assert report["device"].startswith("cuda" if torch.cuda.is_available() else "cpu")
    assert re.fullmatch(r"(bf16|fp32) \(.+\)", report["precision (precision=auto)"])
    assert report["attention kernel (attention=auto)"] == ("sdpa" if torch.cuda.is_available() else "eager")
    assert report["dropout kernel (dropout=auto)"] == ("native" if torch.cuda.is_available() else "fast")


def test_data_report_sizes_labels_and_source(glue_dir):
    from typhoon.report import setup_tables
    report = setup_tables.data_report(["mrpc", "cola"])
    for task, sizes in GLUE_SIZES.items():
        rows = report[report.task == task].set_index("split")
        assert tuple(rows.loc[["train", "validation", "test"], "examples"]) == sizes
        assert all(s == str(locate_glue(task)) and str(glue_dir) in s for s in rows["source"])
        train_labels = np.asarray(load_glue(task)["train"]["label"])
        assert rows.loc["train", "majority_share"] == pytest.approx(max(np.bincount(train_labels)) / len(train_labels))
        assert rows.loc["test", "labels"] == "unlabelled" and np.isnan(rows.loc["test", "majority_share"])
    mrpc_dev = report[(report.task == "mrpc") & (report.split == "validation")].iloc[0]
    assert mrpc_dev["labels"] == "not_equivalent 129 (31.6%), equivalent 279 (68.4%)"


def test_data_source_without_local_folder(monkeypatch):
    from typhoon.report import setup_tables
    monkeypatch.delenv("TYPHOON_GLUE_DIR", raising=False)
    assert setup_tables.glue_source("mrpc") == f"bundled: {BUNDLED_GLUE_DIR / 'MRPC'}"
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert setup_tables.glue_source("rte") == "hub: nyu-mll/glue"  # not bundled: the hub is next (not contacted here)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="data fetch rte"):  # offline: a clear error
        setup_tables.data_report(["rte"])


def test_backbone_report_covers_the_registry():
    from typhoon.models.backbones import BACKBONES
    from typhoon.report import setup_tables
    report = setup_tables.backbone_report().set_index("backbone")
    assert list(report.index) == list(BACKBONES)
    assert report.loc["minilm-l6", "available_now"] and report.loc["tiny-random", "available_now"]
    assert report.loc["minilm-l6", "source"].endswith("model")
    for name, spec in BACKBONES.items():
        assert report.loc[name, "offline"] == spec.offline
        if not spec.offline:
            assert report.loc[name, "source"] == f"hub: {spec.source}"
