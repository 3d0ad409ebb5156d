"""A run's compute settings resolved for this machine, once, into one :class:`RunSettings`: the device, the
precision (``auto``: bf16 where the CPU or GPU runs it fast, by a timing), the attention and dropout kernels
and the torch threads. The process that trains a run resolves them (:func:`resolve_settings`, in
:func:`typhoon.training.run.set_up`), its record writes what they resolved to (:meth:`RunSettings.record`,
:meth:`RunSettings.stored_config`), the setup report shows them; a grid asks the same function what numerics
a config will run in here, and checks that the grid does not mix numerics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from typhoon import paths
from typhoon.config import DEVICES
from typhoon.machine import CpuFeatures, cpu_features
from typhoon.records import BitSource, Numerics, is_complete, numerics_of_run, record_numerics
from typhoon.training.flops import DTYPES, matmul_peak

if TYPE_CHECKING:
    from typhoon.config import RunConfig

def resolve_device(requested: str = "auto") -> torch.device:
    """``auto``: CUDA when visible, else Apple's MPS when torch reports it, else the CPU; a device that is not
    one of :data:`typhoon.config.DEVICES` is refused as a RunConfig refuses it."""
    DEVICES.check("device", requested)
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    return torch.device(requested)


@dataclass(frozen=True)
class Precision:
    """The precision a run trains in, and why (shown in the run record)."""

    name: str  # "bf16" (autocast) or "fp32"
    reason: str

    @property
    def bf16(self) -> bool:
        return self.name == "bf16"


def choose_precision(requested: str, device: torch.device, features: CpuFeatures | None = None,
                     peaks: dict | None = None, threads: int | None = None) -> Precision:
    """The precision of a run: an explicit ``requested`` ("fp32" / "bf16") is kept; ``auto`` picks bf16
    autocast where bf16 matrix products are faster than fp32 ones, fp32 elsewhere.

    AMX tiles are several times faster than fp32 FMAs, so AMX means bf16. AVX512-BF16 alone need not
    be faster: on Sapphire Rapids without AMX (a VM hiding it) bf16 dot products issue on one port,
    FMAs on two, and oneDNN's bf16 products reach about half of MKL's fp32 ones. There the choice
    follows the measured peaks of both dtypes (``peaks``: {"fp32": GFLOP/s, "bf16": GFLOP/s}; measured
    with :func:`typhoon.training.flops.matmul_peak` on ``threads`` threads, None: the current count, when not given).
    """
    if requested in ("fp32", "bf16"):
        return Precision(requested, "requested")
    if requested != "auto":
        raise ValueError(f"unknown precision {requested!r}; choose one of ('auto', 'fp32', 'bf16')")
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return Precision("bf16", f"CUDA {torch.cuda.get_device_name(device)} supports bf16: bf16 autocast")
        return Precision("fp32", "CUDA device without bf16: fp32")
    if device.type == "mps":
        return Precision("fp32", "MPS: fp32 (bf16 autocast on MPS is not assumed fast)")
    features = features or cpu_features()
    if features.amx_bf16:
        return Precision("bf16", "AMX-BF16: bf16 autocast")
    if not features.avx512_bf16:
        return Precision("fp32", "no AVX512-BF16/AMX: fp32")
    peaks = peaks or {dtype: matmul_peak(dtype, threads).gflop_per_s for dtype in DTYPES}
    fp32, bf16 = peaks["fp32"], peaks["bf16"]
    if bf16 > fp32:
        return Precision("bf16", f"AVX512-BF16, bf16 products {bf16:.0f} GFLOP/s vs fp32 {fp32:.0f}: bf16 autocast")
    return Precision("fp32", f"AVX512-BF16 without AMX, but bf16 products ({bf16:.0f} GFLOP/s) are not faster "
                             f"than fp32 ({fp32:.0f}): fp32")


def resolve_attention(requested: str, device: torch.device) -> str:
    """The attention kernel: ``eager`` on CPU, ``sdpa`` (fused / flash) on GPU, unless one is named.

    On CPU the fused SDPA kernel is slow for GLUE's short sequences. With MiniLM-L6 in bf16 its backward
    pass took 44 % of an MLM step without dropout, and eager attention made such steps 1.5-1.8x faster;
    in training (dropout on) eager made MLM and fine-tuning steps 7-11 % faster, and eager attention with
    fast dropout made a whole MRPC run 16 % faster (138 s -> 116 s). On GPU the fused kernel is the fast one.
    """
    if requested != "auto":
        return requested
    return "sdpa" if device.type == "cuda" else "eager"


def resolve_dropout(requested: str, device: torch.device) -> str:
    """The dropout kernel: ``fast`` (typhoon/models/dropout.py) on CPU, where drawing the masks is slow, else ``native``."""
    if requested != "auto":
        return requested
    return "native" if device.type == "cuda" else "fast"


@dataclass(frozen=True)
class RunSettings:
    """Every ``auto`` of a run's config (device, precision, attention, dropout, threads) resolved, never ``auto``."""

    device: torch.device
    precision: Precision
    attention: str  # attention kernel: eager | sdpa
    dropout: str  # dropout kernel: fast | native
    threads: int  # torch threads the run computes on (a CPU's products sum in another order on another count)

    @property
    def numerics(self) -> Numerics:
        """What of these settings changes a run's numbers (:class:`typhoon.records.run_numerics.Numerics`)."""
        return numerics_of_run(self.precision.name, self.device, self.attention, self.dropout)

    def record(self) -> dict:
        """The entries of a run record's ``metrics.json`` that say what the run resolved."""
        return {"device": str(self.device), "precision": self.precision.name, "precision_reason": self.precision.reason,
                "attention": self.attention, "dropout": self.dropout, "threads": self.threads,
                "numerics": self.numerics.to_dict()}

    def stored_config(self, config: RunConfig) -> RunConfig:
        """``config`` as its finished record stores it: the fields whose ``auto`` the run resolves
        (``run_record.RESOLVED_FIELDS``) as they resolved, so that the record says what ran, never ``auto``."""
        return config.replace(precision=self.precision.name, attention=self.attention, dropout=self.dropout)


def resolve_settings(config: RunConfig) -> RunSettings:
    """The one place a config's ``auto`` settings are resolved: by the process that trains it (where its device,
    its cores and the products' timing are), or by a grid asking what a cell would run with here. The precision is
    measured on the run's threads; setting them (``num_threads``) is the run's (:func:`typhoon.training.run.set_up`)."""
    device = resolve_device(config.device)
    threads = config.num_threads or torch.get_num_threads()
    return RunSettings(device, choose_precision(config.precision, device, threads=threads),
                       resolve_attention(config.attention, device), resolve_dropout(config.dropout, device), threads)


def planned_numerics(config: RunConfig) -> str:
    """The numerics label ``config`` would run with on this machine (what ``auto`` resolves to here)."""
    return numerics_here(config).label


def numerics_here(config: RunConfig) -> Numerics:
    """The full numerics ``config`` would run with on this machine: every ``auto`` resolved here."""
    return resolve_settings(config).numerics


def bit_source_here(config: RunConfig) -> BitSource:
    """What would decide the bits of ``config``'s run on this machine: its numerics, this CPU's vendor (off the
    CPU, none: the kernels name the GPU) and this torch build, as a record of it would store them
    (:func:`typhoon.records.bit_source_of_metrics`)."""
    return BitSource.of(numerics_here(config), cpu_features().model, torch.__version__)


def check_numerics(configs: list[RunConfig], out_dir: Path, allow_mixed: bool = False) -> dict[str, int]:
    """The numerics of the grid once its missing cells run here: ``{label: number of runs}``.

    Raises ValueError, before anything runs, when the finished records and the cells still to run would
    use more than one kind of numerics, naming them, unless ``allow_mixed``.
    """
    counts: Counter[str] = Counter()
    todo = []
    for config in configs:
        run_dir = out_dir / config.relative_dir()
        done = record_numerics(run_dir) if is_complete(run_dir, config) else None
        if done is None:
            todo.append(config)
        else:
            counts[done] += 1
    finished = dict(counts)
    planned = Counter(planned_numerics(c) for c in todo)
    counts.update(planned)
    if len(counts) > 1 and not allow_mixed:
        raise ValueError(
            f"{paths.shown(out_dir)} would mix numerics: its finished records used "
            f"{_describe(finished) or 'nothing yet'}, and this machine would run the {len(todo)} missing cell(s) in "
            f"{_describe(dict(planned))}. Finish the grid where it started (or set precision explicitly with "
            "--set precision=...), or pass --allow-mixed-precision: the tables and the report then say the mix.")
    return dict(counts)


def _describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{label} ({n} run{'s' if n != 1 else ''})" for label, n in sorted(counts.items()))
