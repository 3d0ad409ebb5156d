"""How fast a run could go and how much work it does: the measured matrix-product peak of this machine
(per dtype and thread count), the FLOPs of a BERT-like encoder's training step, and a per-phase meter.
(The CPU's features are in :mod:`typhoon.machine`; the device and precision a run uses, in
:mod:`typhoon.training.device_settings`.)

A phase's achieved throughput is its FLOPs divided by its wall time; set beside the measured peak of
the same dtype and thread count it says how close a run comes to what the hardware can do::

    peak = matmul_peak("bf16", threads=1)                     # GFLOP/s, best of a few timed products
    flops = step_flops(model_config, lengths=[64] * 32, selected=300)
    achieved = flops / step_seconds / 1e9                     # GFLOP/s, to compare with peak.gflop_per_s

FLOPs count the matrix products only (a multiply-add is 2 FLOPs), as ``torch.utils.flop_counter``
does: the encoder's linear layers, attention scores and context, the MLM head at the selected positions
and the classifier head. Embedding look-ups, layer norms, activations, softmax and dropout are memory
bound and cost time but no counted FLOPs, so they show up as a gap to the peak. A training step is
3x its forward pass (backward: one product for the input gradient, one for the weight gradient).
"""


from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from typhoon import machine

# (M, K, N): the FFN product of MiniLM-L6 at 2048 tokens (H=384, I=1536), and a square one.
PEAK_SHAPES = {"minilm_ffn": (2048, 384, 1536), "square": (2048, 2048, 2048)}


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class MatmulPeak:
    """The best matrix-product throughput measured on this machine for one dtype and thread count."""

    dtype: str
    threads: int
    device: str
    gflop_per_s: float  # the best of the shapes
    by_shape: dict  # shape name -> GFLOP/s
    clock: str = "wall"  # what timed it: "cpu time x threads" on a CPU, "wall" on a GPU

    def to_dict(self) -> dict:
        return asdict(self)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(m: int, k: int, n: int, dtype: torch.dtype, device: torch.device, *,
                repeats: int = 3, min_seconds: float = 0.1, clock=time.perf_counter) -> float:
    """GFLOP/s of (m x k) @ (k x n), the best of ``repeats`` timed loops of at least ``min_seconds`` each.

    ``clock``: wall time by default; ``time.process_time`` (this process's CPU time) leaves out the
    time other processes held the cores, for one thread on a shared machine."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(device, dtype)
    b = torch.randn(k, n, generator=gen).to(device, dtype)
    out = torch.empty(m, n, dtype=dtype, device=device)
    torch.mm(a, b, out=out)  # warm-up: kernel selection, page faults
    _synchronize(device)
    start = clock()
    torch.mm(a, b, out=out)
    _synchronize(device)
    inner = max(1, int(min_seconds / max(clock() - start, 1e-6)))
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(inner):
            torch.mm(a, b, out=out)
        _synchronize(device)
        best = min(best, (clock() - start) / inner)
    return 2.0 * m * k * n / best / 1e9


def matmul_peak(dtype: str = "fp32", threads: int | None = None, device: str = "cpu", *,
                repeats: int = 3, min_seconds: float = 0.1) -> MatmulPeak:
    """The measured matrix-product peak in GFLOP/s for ``dtype`` ("fp32" / "bf16") on ``threads``
    threads (None: torch's current count); cached per process and thread count. About a second on a CPU.

    On a CPU it is timed by this process's CPU time (times the thread count): on an idle machine that
    is the wall-clock rate, and on a shared one the time other processes held the cores does not
    lower it (timed by the wall clock, a run started beside five busy processes measured 18 GFLOP/s
    where the core does 130). On a GPU it is timed by the wall clock.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} for the matmul peak; choose one of {sorted(DTYPES)}")
    # The count is resolved before the cache: a peak measured on 2 threads is not the peak of a run on 1
    threads = threads or torch.get_num_threads()
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return _measured_peak(dtype, threads, device, repeats, min_seconds)


@functools.cache
def _measured_peak(dtype: str, threads: int, device: str, repeats: int, min_seconds: float) -> MatmulPeak:
    target = torch.device(device)
    on_cpu = target.type == "cpu"
    clock, scale = (time.process_time, threads) if on_cpu else (time.perf_counter, 1)
    with machine.torch_threads(threads):
        by_shape = {name: round(scale * time_matmul(*shape, DTYPES[dtype], target, repeats=repeats,
                                                    min_seconds=min_seconds, clock=clock), 2)
                    for name, shape in PEAK_SHAPES.items()}
    return MatmulPeak(dtype, threads, str(target), max(by_shape.values()), by_shape,
                      "cpu time x threads" if on_cpu else "wall")


matmul_peak.cache_clear = _measured_peak.cache_clear  # the estimate times a fresh measurement


@dataclass(frozen=True)
class EncoderShape:
    """The sizes of a BERT / DistilBERT encoder that its FLOPs depend on."""

    hidden: int
    layers: int
    intermediate: int
    vocab: int

    @classmethod
    def from_config(cls, config) -> EncoderShape:
        """From a transformers BERT or DistilBERT config (or anything with those attribute names)."""
        if hasattr(config, "hidden_dim"):  # DistilBERT's names (it maps hidden_size to dim, but has no intermediate_size)
            return cls(config.dim, config.n_layers, config.hidden_dim, config.vocab_size)
        if hasattr(config, "intermediate_size"):
            return cls(config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.vocab_size)
        raise ValueError(f"cannot read encoder sizes from a {type(config).__name__}: expected a BERT or "
                         "DistilBERT config (hidden_size/num_hidden_layers/intermediate_size or dim/n_layers/hidden_dim)")

    @property
    def matmul_parameters(self) -> int:
        """Weights of the encoder's linear layers (Q, K, V, output, two FFN layers per layer)."""
        return self.layers * (4 * self.hidden * self.hidden + 2 * self.hidden * self.intermediate)


def encoder_forward_flops(shape: EncoderShape, lengths: Sequence[int]) -> float:
    """Matrix-product FLOPs of the encoder's forward pass over rows of these lengths (padding included
    when the lengths are the padded width): linear layers, attention scores and attention context."""
    lengths = np.asarray(lengths, dtype=np.float64)
    linear = 2.0 * lengths.sum() * shape.matmul_parameters
    attention = shape.layers * 4.0 * shape.hidden * np.square(lengths).sum()  # QK^T and PV, all heads
    return float(linear + attention)


def mlm_head_forward_flops(shape: EncoderShape, selected: int) -> float:
    """The MLM head at ``selected`` positions: transform (H x H) and vocabulary projection (H x V)."""
    return 2.0 * selected * shape.hidden * (shape.hidden + shape.vocab)


def classifier_forward_flops(shape: EncoderShape, rows: int, num_labels: int) -> float:
    """The sequence-classification head on each row's first token: pooler (H x H) and classifier (H x C)."""
    return 2.0 * rows * shape.hidden * (shape.hidden + num_labels)


def step_flops(config, lengths: Sequence[int], *, selected: int = 0, num_labels: int = 0,
               backward: bool = True) -> float:
    """Matrix-product FLOPs of one step of a BERT-like model on rows of these lengths.

    ``selected``: positions scored by the MLM head (0: no MLM head); ``num_labels``: classes of a
    sequence-classification head (0: none); ``backward``: a training step (3x the forward pass) rather
    than an evaluation pass. Pass the padded width for every row to count the work executed, the real
    lengths to count the useful work.
    """
    shape = config if isinstance(config, EncoderShape) else EncoderShape.from_config(config)
    if selected < 0 or num_labels < 0:
        raise ValueError(f"selected and num_labels must be >= 0, got {selected} and {num_labels}")
    forward = encoder_forward_flops(shape, lengths) + mlm_head_forward_flops(shape, selected)
    if num_labels:
        forward += classifier_forward_flops(shape, len(lengths), num_labels)
    return 3.0 * forward if backward else forward


class PhaseMeter:
    """FLOPs, wall time and CPU time of one training phase, for its achieved GFLOP/s.

    ``add`` takes each batch's attention mask (real tokens = 1): the *useful* FLOPs count the real
    tokens only, the *executed* ones the padded width, so padding shows as their difference. CPU time
    is this process's (user + system, all threads): on a shared machine it leaves out the time other
    processes held the cores.
    """

    def __init__(self, model_config):
        self.shape = EncoderShape.from_config(model_config)
        self.useful = self.executed = 0.0
        self.wall_s = self.cpu_s = 0.0
        self._started: tuple[float, float] | None = None
        self._selected_on_device: dict[bool, torch.Tensor] = {}  # backward? -> selected positions summed there

    def start(self) -> PhaseMeter:
        self._started = (time.perf_counter(), time.process_time())
        return self

    def stop(self) -> None:
        for backward, selected in self._selected_on_device.items():  # one read from the device per phase part
            self.useful += step_flops(self.shape, [], selected=int(selected), backward=backward)  # executed: in add
        self._selected_on_device = {}
        wall, cpu = self._started
        self.wall_s += time.perf_counter() - wall
        self.cpu_s += time.process_time() - cpu
        self._started = None

    def state(self) -> dict:
        """The counts and times so far, for a resume state (the meter must be stopped)."""
        return {"useful": self.useful, "executed": self.executed, "wall_s": self.wall_s, "cpu_s": self.cpu_s}

    def load_state(self, state: dict) -> None:
        """Go on from :meth:`state`'s counts and times (a resumed phase)."""
        self.useful, self.executed = state["useful"], state["executed"]
        self.wall_s, self.cpu_s = state["wall_s"], state["cpu_s"]

    def add(self, attention_mask: torch.Tensor, *, selected: int | torch.Tensor = 0, num_labels: int = 0,
            backward: bool = True) -> None:
        """Count one batch. ``selected`` may be a count on a device (masks drawn there): it is summed there and
        read when the meter stops. Such a step's head scored every position, which the executed FLOPs count."""
        rows, width = attention_mask.shape
        if isinstance(selected, torch.Tensor):
            so_far = self._selected_on_device.get(backward)
            self._selected_on_device[backward] = selected if so_far is None else so_far + selected
            self.executed += step_flops(self.shape, [], selected=rows * width, backward=backward)
            selected = 0
        lengths = attention_mask.sum(1).tolist()
        kwargs = dict(selected=selected, num_labels=num_labels, backward=backward)
        self.useful += step_flops(self.shape, lengths, **kwargs)
        self.executed += step_flops(self.shape, [width] * rows, **kwargs)

    def summary(self, phase: str) -> dict:
        """``<phase>_gflop``, ``<phase>_gflop_per_s`` (useful, by wall clock), ``<phase>_executed_gflop_per_s``,
        ``<phase>_cpu_s`` and ``<phase>_gflop_per_cpu_s`` (useful, per second of CPU time, all threads)."""
        def per(seconds: float, flops: float) -> float | None:
            return flops / seconds / 1e9 if seconds > 0 else None

        return {f"{phase}_gflop": round(self.useful / 1e9, 3), f"{phase}_gflop_per_s": per(self.wall_s, self.useful),
                f"{phase}_executed_gflop_per_s": per(self.wall_s, self.executed), f"{phase}_cpu_s": self.cpu_s,
                f"{phase}_gflop_per_cpu_s": per(self.cpu_s, self.useful)}


def peak_fractions(timing: dict, phase: str, peak: MatmulPeak) -> dict:
    """A phase's achieved share of the matmul peak (same dtype and threads), from its :meth:`PhaseMeter.summary`.

    ``<phase>_peak_fraction``: wall-clock GFLOP/s / peak, what the run got. ``<phase>_cpu_peak_fraction``
    (CPU only): GFLOP per CPU-second x threads / peak, what the code gets from the cores it is given;
    on a shared machine the two differ by the time other processes held the cores.
    """
    rate, per_cpu = timing.get(f"{phase}_gflop_per_s"), timing.get(f"{phase}_gflop_per_cpu_s")
    out = {f"{phase}_peak_fraction": rate / peak.gflop_per_s if rate else None}
    if peak.device == "cpu":
        out[f"{phase}_cpu_peak_fraction"] = per_cpu * peak.threads / peak.gflop_per_s if per_cpu else None
    return out
