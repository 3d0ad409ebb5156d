"""The numerics a run computed in (precision, device, attention and dropout kernels, the CPU kernel family),
read from its record or made from a run's resolved choices, and what beyond them decides a record's bits (the
CPU's vendor, the torch build: :class:`BitSource`). What a config will run in on this machine, and the
check that a grid's records share one numerics, are :mod:`typhoon.training.device_settings`'s."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from typhoon import machine
from typhoon.records import run_record


def numerics(precision: str | None, device: str | None) -> str:
    """The numerics of a run, as a label: ``"<precision> on <device kind>"``, e.g. ``"bf16 on cpu"``."""
    kind = str(device or "unknown").split(":")[0]
    return f"{precision or 'unknown'} on {kind}"


# Environment variables that cap the instruction set oneDNN / MKL dispatch to (an AVX2 emulation on an
# AVX-512 CPU): part of a run's numerics, since another kernel sums in another order.
ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def kernel_family(precision: str, device_kind: str, cpu: dict | None, env: dict | None = None) -> str:
    """The family of matrix-product kernels a run's numbers came from: ``amx``, ``avx512_bf16``,
    ``avx512``, ``avx2`` or ``generic`` on a CPU (from its feature flags, ``CpuFeatures.to_dict()``, and any
    ISA cap in ``env``), the device kind elsewhere. Two CPUs of one family run the same kernels; AMX and
    AVX512-BF16 both compute bf16 products, but accumulate in different orders, so their records differ."""
    if device_kind != "cpu":
        return device_kind
    if not cpu:
        return "unknown"  # an older record that did not store its CPU's flags
    if precision == "bf16":
        family = "amx" if cpu.get("amx_bf16") else "avx512_bf16" if cpu.get("avx512_bf16") else "generic"
    else:
        family = "avx512" if cpu.get("avx512f") else "avx2" if cpu.get("avx2") else "generic"
    caps = [f"{name}={value}" for name, value in sorted((env or {}).items()) if name in ISA_CAPS and value]
    return family + (f" ({', '.join(caps)})" if caps else "")


@dataclass(frozen=True)
class Numerics:
    """Everything about where a run ran that changes its numbers, resolved (never ``auto``).

    ``label`` is the coarse kind the tables and the mixing check speak of (bf16 vs fp32, CPU vs GPU);
    ``key`` adds the kernels (AMX vs AVX512-BF16, AVX-512 vs AVX2 products, the attention and dropout
    kernels): two records can only be bit-identical, and a record can only stand in for a run of this
    machine, when their keys are equal.
    """

    precision: str
    device: str  # the device kind: cpu | cuda | mps
    kernels: str  # kernel_family()
    attention: str
    dropout: str

    @property
    def label(self) -> str:
        return numerics(self.precision, self.device)

    @property
    def kernel_label(self) -> str:
        """The label with the kernel family, ``"bf16 on cpu (amx)"``: what the two arms of a paired difference
        must share (another family sums in another order, a small difference that is not the strategy's)."""
        return f"{self.label} ({self.kernels})"

    @property
    def key(self) -> str:
        return f"{self.kernel_label}, {self.attention} attention, {self.dropout} dropout"

    def mixes_with(self, other: Numerics) -> bool:
        """Whether a difference between a run of these numerics and one of ``other``'s mixes numerics: another
        precision, device kind or kernel family. An ``unknown`` family (an older record that did not store its
        CPU's flags) is taken to match: nothing says it differs."""
        if self.label != other.label:
            return True
        return "unknown" not in (self.kernels, other.kernels) and self.kernels != other.kernels

    def to_dict(self) -> dict:
        return asdict(self)


def numerics_of_metrics(metrics: dict) -> Numerics:
    """The numerics a record ran with, from its ``metrics.json``: its ``numerics`` entry where it has one,
    else worked out from what older records stored (precision, device, kernels, CPU flags)."""
    if isinstance(metrics.get("numerics"), dict):
        return Numerics(**metrics["numerics"])
    device = str(metrics.get("device") or "unknown").split(":")[0]
    precision = str(metrics.get("precision") or "unknown")
    cpu = (metrics.get("hardware") or {}).get("cpu")
    return Numerics(precision, device, kernel_family(precision, device, cpu),
                    str(metrics.get("attention") or "unknown"), str(metrics.get("dropout") or "unknown"))


@dataclass(frozen=True)
class BitSource:
    """What decides a record's bits: its :class:`Numerics` (precision, device kind, kernel family, attention and
    dropout kernels), the CPU's vendor and the torch build. Two records can be expected bit-identical only
    where all of these match: an Intel and an AMD CPU of one kernel family (both AVX-512, say) run other
    oneDNN / MKL code paths, and another torch build other kernels, so their sums come in another order and
    their numbers differ in the last bits. ``unknown`` (an older record that did not store it) never matches."""

    numerics: Numerics
    vendor: str  # machine.cpu_vendor of the record's CPU model; "" off the CPU (the kernels name the GPU)
    torch: str  # the torch version and build, e.g. "2.13.0+cpu"

    @classmethod
    def of(cls, numerics: Numerics, cpu_model: str | None, torch_build: str) -> BitSource:
        """The bit source of a run in ``numerics`` on the CPU named ``cpu_model`` with ``torch_build``: the vendor
        counts only on the CPU (on a GPU the kernels name the device). A record's and this machine's are both made
        here, so reuse compares like with like."""
        return cls(numerics, machine.cpu_vendor(cpu_model) if numerics.device == "cpu" else "", torch_build)

    @property
    def label(self) -> str:
        """``"fp32 on AMD cpu (avx512), torch 2.13.0+cpu, eager attention, fast dropout"``."""
        n = self.numerics
        where = f"{self.vendor} {n.device}" if self.vendor else n.device
        return (f"{n.precision} on {where} ({n.kernels}), torch {self.torch}, {n.attention} attention, "
                f"{n.dropout} dropout")

    @property
    def known(self) -> bool:
        return "unknown" not in (self.vendor, self.torch, self.numerics.kernels, self.numerics.precision)

    def same_bits_expected(self, other: BitSource) -> bool:
        """Whether a record of ``other`` should equal one of these bit for bit: every part known and equal."""
        return self.known and other.known and self == other


def bit_source_of_metrics(metrics: dict) -> BitSource:
    """What decided a record's bits, from its ``metrics.json`` (:class:`BitSource`)."""
    cpu = (metrics.get("hardware") or {}).get("cpu") or {}
    return BitSource.of(numerics_of_metrics(metrics), cpu.get("model"),
                        str((metrics.get("versions") or {}).get("torch") or "unknown"))


def record_numerics(run_dir: Path) -> str | None:
    """The numerics label a finished (status ok) record used; None when there is no such record."""
    found = record_numerics_detail(run_dir)
    return found.label if found else None


def record_numerics_detail(run_dir: Path) -> Numerics | None:
    """The full numerics (:class:`Numerics`) a finished (status ok) record used; None without such a record."""
    metrics = run_record.read_json(Path(run_dir) / "metrics.json")
    if not metrics or metrics.get("status") != "ok":
        return None
    return numerics_of_metrics(metrics)


def numerics_of_run(precision: str, device, attention: str, dropout: str) -> Numerics:
    """The numerics of a run on this machine with these resolved choices (``device``: a torch.device)."""

    kind = device.type
    kernels = kernel_family(precision, kind, machine.cpu_features().to_dict(), dict(os.environ))
    if kind == "cuda":  # another GPU model runs other kernels
        import torch

        kernels = f"cuda ({torch.cuda.get_device_name(device)})"
    return Numerics(precision, kind, kernels, attention, dropout)


def results_numerics(results) -> dict[str, int]:
    """``{numerics label: runs}`` over the ok rows of a results table (its ``precision`` and ``device``)."""
    ok = results[results["status"].astype(str) == "ok"]
    return dict(Counter(numerics(p, d) for p, d in zip(ok["precision"], ok["device"], strict=True)))
