"""A GPU run draws its masks on the device and Typhoon learns there (``RunContext.masks_on_device``), so that a step
never waits for the device. The same path, forced on the CPU, is checked here against the host path: the MLM head
scoring every position gives the loss of the selected positions (against a cross-entropy written out by hand), and
training steps of either path draw the same masks and learn the same state, to float64 rounding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from typhoon.masking import SaliencySource, saliency_kind
from typhoon.profiles import resolve
from typhoon.training import run as training_run
from typhoon.training import step as training_step


@pytest.fixture(scope="module")
def smoke_ctx():
    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": "typhoon", "seed": 0},
                     {"device": "cpu", "max_train_examples": 64, "max_eval_examples": 16})
    ctx = training_run.set_up(config, progress=False)
    assert not ctx.masks_on_device  # a CPU run draws on the host, as the committed records were drawn
    return ctx


def train_steps(ctx, on_device: bool, strategy_name: str, steps: int = 4):
    config = dataclasses.replace(ctx.config, strategy=strategy_name)
    ctx = dataclasses.replace(ctx, config=config, masks_on_device=on_device,
                              mask_generator=torch.Generator().manual_seed(config.seed))
    torch.manual_seed(0)
    mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device).double()
    optimizer = training_step.make_optimizer(mlm, config.mlm_lr, config.weight_decay)
    scheduler = training_step.linear_schedule(optimizer, 100, config.warmup_ratio)
    strategy = training_run.prepared_strategy(ctx)
    saliency = SaliencySource(saliency_kind(config), None)
    train = ctx.data["train"]
    done = [training_step.mlm_step(ctx, mlm, strategy, optimizer, scheduler, train[16 * i:16 * (i + 1)], saliency)
            for i in range(steps)]
    return done, strategy


@pytest.mark.parametrize("strategy_name", ["random", "typhoon"])
def test_steps_with_masks_on_the_device_match_the_host_path(smoke_ctx, strategy_name):
    host, host_strategy = train_steps(smoke_ctx, False, strategy_name)
    device, device_strategy = train_steps(smoke_ctx, True, strategy_name)
    if strategy_name == "typhoon":  # learning where the masks are drawn: here the CPU, standing in for a GPU
        assert device_strategy.device == torch.device("cpu") and host_strategy.device is None
    for a, b in zip(host, device, strict=True):
        assert isinstance(a.selected, int) and isinstance(b.selected, torch.Tensor)  # counted where drawn
        assert int(b.selected) == a.selected  # the same masks: the same generator, the same draws
        # float64 models: the dense head's sum differs from the gathered one's only by rounding
        assert b.loss.item() == pytest.approx(a.loss.item(), rel=1e-9)
    if strategy_name == "typhoon":
        assert device_strategy.steps == host_strategy.steps == 4
        np.testing.assert_allclose(device_strategy.probs, host_strategy.probs, rtol=1e-8)


def test_every_position_loss_is_the_mean_cross_entropy_of_the_selected_positions(smoke_ctx):
    torch.manual_seed(1)
    mlm = smoke_ctx.backbone.mlm_model(seed=0, **smoke_ctx.kernels).double().eval()
    ids = torch.randint(5, 100, (3, 16))
    attention = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    chosen = [(0, 2), (0, 7), (1, 1), (2, 15)]
    for row, col in chosen:
        labels[row, col] = ids[row, col]
    with torch.no_grad():
        dense = mlm(input_ids=ids, attention_mask=attention, labels=labels, every_position=True)
        gathered = mlm(input_ids=ids, attention_mask=attention, labels=labels)
        hidden = mlm.encoder(input_ids=ids, attention_mask=attention).last_hidden_state
        by_hand = sum(-torch.log_softmax(mlm.head(hidden[row, col][None]), -1)[0, ids[row, col]] for row, col in chosen)
    assert float(dense) == pytest.approx(float(by_hand) / len(chosen), rel=1e-12)
    assert float(gathered) == pytest.approx(float(by_hand) / len(chosen), rel=1e-12)
    nothing = mlm(input_ids=ids, attention_mask=attention, labels=torch.full_like(ids, -100), every_position=True)
    nothing.backward()
    assert nothing.item() == 0.0  # nothing selected: a loss of 0, rather than NaN


def test_a_meter_counts_device_counts_when_it_stops(smoke_ctx):
    from typhoon.training.flops import PhaseMeter, step_flops

    mask = torch.ones(2, 8, dtype=torch.long)
    on_host, on_device = PhaseMeter(smoke_ctx.backbone.config), PhaseMeter(smoke_ctx.backbone.config)
    for meter, selected in ((on_host, 5), (on_device, torch.tensor(5))):
        meter.start()
        meter.add(mask, selected=selected)
        meter.add(mask, selected=selected)
        meter.stop()
    assert on_device.useful == pytest.approx(on_host.useful, rel=1e-12)
    # the device step's head scored all 16 positions: executed counts 16, not 5, per batch
    head_16, head_5 = (step_flops(on_host.shape, [], selected=n) for n in (16, 5))
    assert on_device.executed - on_host.executed == pytest.approx(2 * (head_16 - head_5), rel=1e-12)
