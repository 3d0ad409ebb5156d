"""The kl-original study: each row changes only what it says against the baseline; the curve's epoch-by-epoch
cells (each resumed from the state the one before left) give what one uninterrupted phase 1 gives, whichever
executor runs them; a curve asked for fewer epochs than it has, or given another run's checkpoints, is refused."""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
import torch

from typhoon.masking import load_state
from typhoon.profiles import resolve
from typhoon.studies.kl_original import cells as kl_cells
from typhoon.studies.kl_original import design
from typhoon.studies.kl_original import runs as kl_original


def test_each_row_changes_only_its_own_fields_of_the_baseline():
    baseline = asdict(kl_original.row_config("baseline", "cola", 2))
    assert (baseline["backbone"], baseline["strategy"], baseline["p"], baseline["batch_size"], baseline["mlm_lr"],
            baseline["mlm_epochs"]) == ("minilm-l6-mlm", "typhoon", 0.15, 32, 5e-5, 1)
    for row in design.ROWS:
        config = asdict(kl_original.row_config(row.name, "cola", 2))
        changed = {k for k in config if config[k] != baseline[k]}
        expected = set(row.overrides)
        if config["strategy"] == "typhoon_2023":  # the alias sets the three rules in the config (all, the addendum)
            expected |= {"ema_start", "unseen", "budget"}
        assert changed == expected, row.name
    curve = kl_original.curve_config("mrpc", 0)
    assert (curve.strategy, curve.p, curve.corruption, curve.batch_size, curve.mlm_lr, curve.warmup_ratio,
            curve.mlm_epochs) == ("typhoon_2023", 0.3, "mask_only", 16, 1e-4, 0.0, 100)
    with pytest.raises(ValueError, match=r"unknown row 'weather'; choose one of \['baseline'"):
        design.row_named("weather")


def tiny_config(epochs: int):
    return resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "typhoon_2023", "seed": 3},
                   {"mlm_epochs": epochs, "max_train_examples": 48, "max_eval_examples": 16, "p": 0.3,
                    "corruption": "mask_only", "num_threads": 1})


CURVE_FILES = ("epochs.csv", "trace.csv", "mlm_loss.csv", "epoch1/masking_state.npz", "epoch3/masking_state.npz")


@pytest.mark.slow
def test_the_curve_epoch_by_epoch_equals_one_uninterrupted_phase(tmp_path, monkeypatch):
    monkeypatch.setattr(kl_cells, "SNAPSHOT_EPOCHS", (1, 3))
    monkeypatch.setattr(kl_cells, "TRACE_EVERY", 2)  # 3 steps an epoch: a trace row in every epoch, none at its end
    config = tiny_config(3)
    folder, state = tmp_path / "curve", tmp_path / "ckpt" / "run.resume.pt"
    for epoch, expected in ((1, 1), (2, 2), (3, 3), (3, 3)):  # one epoch a call; a call for a reached epoch does nothing
        assert kl_cells.run_curve_epoch(config, folder, state, epoch) == expected
    epochs = pd.read_csv(folder / "epochs.csv")
    assert list(epochs["epoch"]) == [1, 2, 3]
    assert sorted(p.name for p in folder.glob("epoch*") if p.is_dir()) == ["epoch1", "epoch3"]
    # the trace is the curve's own file, read back when it goes on: every step 2, 4, ... of the three epochs
    assert pd.read_csv(folder / "trace.csv")["step"].tolist() == [2, 4, 6, 8]
    assert "trace" not in json.dumps(torch.load(state, weights_only=True)["progress"])

    # the same three epochs in one call: every file the same, byte for byte
    whole = tmp_path / "whole"
    assert kl_cells.run_curve_epoch(config, whole, tmp_path / "ckpt2" / "run.resume.pt", 3) == 3
    for name in CURVE_FILES:
        assert (whole / name).read_bytes() == (folder / name).read_bytes(), name

    # the reference: phase 1 of the same config in one go, as the KL-gap study runs it
    from typhoon.training.run import phase_one, set_up

    ctx = set_up(config, progress=False)
    torch.manual_seed(config.seed)
    one = phase_one(ctx)
    resumed = load_state(folder / "epoch3" / "masking_state.npz")
    for key in ("weights", "seen", "probs", "counts", "special_counts"):
        np.testing.assert_array_equal(resumed[key], one.strategy.state_dict()[key], err_msg=key)
    losses = pd.read_csv(folder / "mlm_loss.csv")
    assert losses["loss"].tolist() == [row["loss"] for row in one.loss_rows]
    # the last epoch's KL, as the epochs table wrote it, is the reference state's
    from typhoon.analysis.kl.units import kl_definitions

    reference = kl_definitions(one.strategy.probs, one.strategy.counts, 0.3, len(ctx.data["train"]))
    assert epochs.iloc[-1]["bernoulli"] == reference["bernoulli"]
    assert json.loads((folder / "run.json").read_text())["epochs_reached"] == 3
