"""The ``gpu`` tier (issue 50, item 7): what only a CUDA device can show. Every test here is marked ``gpu``
and skipped where torch sees no CUDA device (conftest); ``make test-gpu`` and ``scripts/gpu_check.sh`` run them.

- Saliency through the probe equals the one-hot autograd reference (``test_saliency``'s, in float64 on the
  CPU) on CUDA: in fp32 to float32 rounding, and under bf16 autocast within a stated tolerance.
- The smoke grid (tiny-random alone) runs on ``cuda`` end to end (worker processes, records, analysis notebooks).
- A training step makes no host sync (``torch.cuda.set_sync_debug_mode("error")`` around it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REPO
from test_saliency import MASK_ID, VOCAB, synthetic_batch, tiny_bert

from typhoon.masking import SaliencyProbe, get_strategy
from typhoon.profiles import resolve

pytestmark = pytest.mark.gpu

# bf16 keeps 8 significant bits (a relative rounding of 2^-9 per operation): through two layers, their backward
# and the (B, L, H) product, the saliency vector as a whole stays within 5 % of the exact one (relative L2;
# 0.4 % measured with bf16 autocast on the CPU, AMD EPYC AVX512-BF16: the bound leaves room for other kernels).
BF16_RELATIVE_L2 = 0.05


def one_hot_reference(model, masked_ids, true_ids, attention_mask, labels) -> torch.Tensor:
    """dL/de_{i, t_i} by autograd through ``one_hot @ W`` in float64 on the CPU: the exact saliency."""
    model = model.double().cpu().eval()
    model.zero_grad()
    one_hot = torch.nn.functional.one_hot(masked_ids, VOCAB).double().requires_grad_(True)
    model(inputs_embeds=one_hot @ model.get_input_embeddings().weight, attention_mask=attention_mask,
          labels=labels).loss.backward()
    return one_hot.grad.gather(-1, true_ids[..., None]).squeeze(-1)


def probe_saliency(model, masked_ids, true_ids, attention_mask, labels, device: str, bf16: bool) -> torch.Tensor:
    """The probe's saliency with the model in float32 on ``device``, under bf16 autocast if asked (as a run)."""
    model = model.float().to(device).eval()
    model.zero_grad()
    autocast = torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=bf16)
    with SaliencyProbe(model.get_input_embeddings()) as probe:
        with autocast:
            loss = model(input_ids=masked_ids.to(device), attention_mask=attention_mask.to(device),
                         labels=labels.to(device)).loss
        loss.backward()
    return probe.saliency(true_ids.to(device)).double().cpu()


def saliency_pair(bf16: bool, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = tiny_bert()
    batch = synthetic_batch(1, rows=8, length=32)
    masked_ids, labels = get_strategy("random", p=0.3)(batch, torch.Generator().manual_seed(2), mask_token_id=MASK_ID,
                                                        vocab_size=VOCAB)
    args = (masked_ids, batch["input_ids"], batch["attention_mask"], labels)
    hooked = probe_saliency(model, *args, device=device, bf16=bf16)  # first: the reference turns the model to float64
    return hooked, one_hot_reference(model, *args)


@pytest.fixture(scope="module")
def cuda():
    if not torch.cuda.is_available():  # conftest skips the tier already; this says why if run by hand
        pytest.skip("no CUDA device")
    return "cuda"


def test_saliency_on_cuda_in_fp32_equals_one_hot_autograd(cuda):
    hooked, exact = saliency_pair(bf16=False, device=cuda)
    assert exact.abs().max() > 0
    # float32 rounding of the same sums in another order (TF32 is off for matmuls by torch's default)
    torch.testing.assert_close(hooked, exact, rtol=1e-4, atol=1e-5 * float(exact.abs().max()))


def test_saliency_on_cuda_in_bf16_stays_within_the_stated_tolerance(cuda):
    hooked, exact = saliency_pair(bf16=True, device=cuda)
    relative = float((hooked - exact).norm() / exact.norm())
    assert relative <= BF16_RELATIVE_L2, f"bf16 saliency {relative:.3f} (relative L2) from the exact one"


def mlm_step_setup(strategy: str, device: str):
    """One smoke cell's MLM step as the run takes it (:func:`typhoon.training.step.mlm_step`), set up on ``device``
    the way the estimate's calibration sets it up; returns a function taking one step."""
    from typhoon.masking.saliency_source import SaliencySource, saliency_kind
    from typhoon.training import run as training_run
    from typhoon.training import step as training_step

    config = resolve("smoke", {"task": "mrpc", "backbone": "tiny-random", "strategy": strategy, "seed": 0},
                     {"device": device, "max_train_examples": 64, "max_eval_examples": 16})
    ctx = training_run.set_up(config, progress=False)
    mlm = ctx.backbone.mlm_model(seed=config.seed, **ctx.kernels).to(ctx.device)
    optimizer = training_step.make_optimizer(mlm, config.mlm_lr, config.weight_decay)
    scheduler = training_step.linear_schedule(optimizer, 100, config.warmup_ratio)
    assert ctx.masks_on_device  # a GPU run draws its masks and keeps Typhoon's state on the GPU
    masking = training_run.prepared_strategy(ctx)
    train = ctx.data["train"]
    saliency = SaliencySource(saliency_kind(config), None)
    return (lambda rows: training_step.mlm_step(ctx, mlm, masking, optimizer, scheduler, train[:rows], saliency)), masking


@pytest.mark.parametrize("strategy", ["random", "typhoon"])
def test_an_mlm_step_makes_no_host_sync(cuda, strategy):
    """A GPU run draws its masks on the device, Typhoon's state learns there (``TyphoonMasking.learn_on``) and the
    MLM head scores every position, so nothing in a step has to come back to the host: the step queues its work
    and returns. Not yet seen on a device: transformers' SDPA mask check (``padding_mask.all()`` in
    ``masking_utils._ignore_bidirectional_mask_sdpa``) may sync for a padded batch; the error then names it."""
    step, masking = mlm_step_setup(strategy, cuda)
    step(16)  # the first step allocates the optimizer's state and warms the kernels up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        assert step(16) is not None
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    if strategy == "typhoon":
        assert masking.device.type == "cuda" and masking.steps == 2


def smoke_without_minilm(folder) -> tuple[str, int]:
    """A profiles file holding ``gpu-smoke``: the smoke profile without its extra cells (the minilm-l6 one), so that
    a GPU machine needs only the tokenizer, not the MiniLM's weights (an offline GPU machine may take only so much
    of this checkout: scripts/device_bundle.py prepare --max-mib). Returns the file's path and the number of cells."""
    from typhoon.profiles import get_profile

    smoke = get_profile("smoke")
    toml = lambda table: "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())  # noqa: E731
    body = dict(description="the smoke grid on tiny-random alone", tasks=smoke.tasks, backbones=smoke.backbones,
                strategies=smoke.strategies, seeds=smoke.seeds, workers=smoke.workers, pipeline_check=True)
    path = folder / "gpu_profiles.toml"
    path.write_text(f"[gpu-smoke]\n{toml(body)}[gpu-smoke.settings]\n{toml(smoke.settings)}"
                    f"[gpu-smoke.analysis]\n{toml(smoke.analysis)}", encoding="utf-8")
    return str(path), len(smoke.tasks) * len(smoke.backbones) * len(smoke.strategies) * len(smoke.seeds)


@pytest.mark.slow  # the smoke grid in worker processes, then the analysis notebooks
def test_the_smoke_grid_runs_on_cuda(cuda, tmp_path):
    out = tmp_path / "out"
    profiles, cells = smoke_without_minilm(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "TYPHOON_PROFILES": profiles}
    done = subprocess.run([sys.executable, "-m", "typhoon", "reproduce", "--profile", "gpu-smoke", "--set", "device=cuda",
                           "--out", str(out)], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = pd.read_csv(out / "results.csv")
    assert len(results) == cells and (results["status"] == "ok").all()
    for metrics in out.glob("runs/*/*/*/seed*/metrics.json"):
        assert json.loads(metrics.read_text())["device"].startswith("cuda"), metrics
    assert (out / "report.html").is_file()


def test_typhoon_learning_on_cuda_equals_the_host_path(cuda):
    """The state learning on the GPU (torch float64 there) against the numpy path, the reference: the same saliency
    gives the same weights and probabilities to float64 rounding (CUDA's atomic adds sum in no fixed order)."""
    batch = synthetic_batch(0, rows=6, length=24)
    saliency = torch.randn(batch["input_ids"].shape, generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(batch["input_ids"].reshape(-1), minlength=VOCAB).numpy() + 1
    on_host, on_device = get_strategy("typhoon", p=0.3), get_strategy("typhoon", p=0.3)
    for strategy in (on_host, on_device):
        strategy.prepare(counts)
    on_device.learn_on(cuda)
    selected = on_host.select(batch, torch.Generator().manual_seed(1))
    on_host.update(batch, selected, saliency)
    on_device.update({k: v.to(cuda) for k, v in batch.items()}, selected.to(cuda), saliency.to(cuda))
    assert on_host.steps == on_device.steps == 1
    np.testing.assert_allclose(on_device.probs, on_host.probs, rtol=1e-12)
    np.testing.assert_allclose(on_device.weights, on_host.weights, rtol=1e-12, equal_nan=True)
