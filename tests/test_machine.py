"""typhoon.machine.gpu_devices: no GPU is an answer ([]), a CUDA that cannot start is an error, never a
quiet fall-back to the CPU. torch's CUDA calls are replaced by fakes that behave as torch does in each case
(a CPU build; a CUDA build without a driver; one whose driver is too old, which torch only warns about)."""

import warnings

import pytest
import torch

from typhoon import machine


def fake_cuda(monkeypatch, *, built: bool, count: int = 0, warning: str | None = None):
    def device_count():
        if warning:
            warnings.warn(f"CUDA initialization: {warning}", UserWarning, stacklevel=2)
        return count

    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: built)
    monkeypatch.setattr(torch.cuda, "device_count", device_count)


def test_a_cpu_build_of_torch_has_no_gpu(monkeypatch):
    fake_cuda(monkeypatch, built=False, count=3)  # not even asked
    assert machine.gpu_devices() == []


def test_a_cuda_build_without_a_driver_runs_on_the_cpu(monkeypatch):
    fake_cuda(monkeypatch, built=True, warning="Found no NVIDIA driver on your system. Please check ...")
    assert machine.gpu_devices() == []


def test_a_cuda_build_with_every_device_hidden_runs_on_the_cpu(monkeypatch):
    fake_cuda(monkeypatch, built=True, count=0)  # CUDA_VISIBLE_DEVICES="": no device, no warning
    assert machine.gpu_devices() == []


def test_a_broken_cuda_install_is_an_error_not_a_cpu_grid(monkeypatch):
    fake_cuda(monkeypatch, built=True, warning="The NVIDIA driver on your system is too old (found version 11040).")
    with pytest.raises(RuntimeError, match="cannot use CUDA: CUDA initialization: The NVIDIA driver .* too old"):
        machine.gpu_devices()


def test_the_devices_torch_sees(monkeypatch):
    fake_cuda(monkeypatch, built=True, count=2)
    assert machine.gpu_devices() == ["cuda:0", "cuda:1"]


def test_usable_cores_is_capped_by_the_container_quota(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs -> 2 cores, if the affinity allows as many
    assert machine.usable_cores(cpu_max) == min(2, machine.usable_cores(tmp_path / "missing"))
    cpu_max.write_text("max 100000\n")
    assert machine.usable_cores(cpu_max) == machine.usable_cores(tmp_path / "missing")
