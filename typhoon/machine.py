"""Facts about this machine: the CPU's vector extensions, the cores this process may use, the GPUs torch
sees, how many threads a cell gets, and the one-line description a record and a report carry.

Torch-free at import (the grid's batch process and the CLI read these before any cell starts); torch is
imported where a fact needs it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import platform
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typhoon.config import RunConfig


CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuFeatures:
    """The x86 vector and matrix extensions that decide which precision runs fast on this CPU."""

    avx2: bool
    avx512f: bool
    avx512_bf16: bool  # bf16 dot products in AVX-512 registers (Cooper Lake, Sapphire Rapids, Zen 4 ...)
    amx_bf16: bool  # bf16 tile matrix multiply (Sapphire Rapids and later)
    amx_tile: bool
    model: str
    source: str  # where the flags came from: "/proc/cpuinfo" or torch's dispatch capability

    @property
    def native_bf16(self) -> bool:
        """True where bf16 matrix products run on bf16 hardware (AMX tiles or AVX512-BF16)."""
        return self.amx_bf16 or self.avx512_bf16

    def to_dict(self) -> dict:
        return asdict(self)


def parse_cpuinfo(text: str) -> tuple[set[str], str]:
    """The feature flags and model name of the first processor listed in a /proc/cpuinfo text."""
    flags, model = set(), ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("flags", "Features") and not flags:  # x86 says "flags", ARM "Features"
            flags = set(value.split())
        elif key == "model name" and not model:
            model = value.strip()
    return flags, model


def features_from_flags(flags: set[str], model: str, source: str) -> CpuFeatures:
    return CpuFeatures(avx2="avx2" in flags, avx512f="avx512f" in flags, avx512_bf16="avx512_bf16" in flags,
                       amx_bf16="amx_bf16" in flags, amx_tile="amx_tile" in flags, model=model, source=source)


def features_from_capability(capability: str) -> CpuFeatures:
    """What torch's dispatch level (``torch.backends.cpu.get_cpu_capability()``) tells, where no
    /proc/cpuinfo exists (macOS, Windows): AVX2 and AVX-512, but nothing about bf16 units."""
    level = capability.upper()
    return CpuFeatures(avx2=level in ("AVX2", "AVX512"), avx512f=level == "AVX512", avx512_bf16=False,
                       amx_bf16=False, amx_tile=False, model=platform.processor() or platform.machine(),
                       source=f"torch capability {capability}")


# The CPU vendors, by what their model names say. Two CPUs of one kernel family (AVX-512 products, say) but of
# two vendors do not compute the same bits: oneDNN and MKL choose blockings and code paths per vendor and
# model, so the sums of a matrix product come in another order.
CPU_VENDORS = {"Intel": ("intel", "xeon", "core(tm)", "genuineintel"), "AMD": ("amd", "epyc", "ryzen", "authenticamd"),
               "Arm": ("arm", "neoverse", "graviton", "cortex"), "Apple": ("apple",)}


def cpu_vendor(model: str | None) -> str:
    """The vendor a CPU model name says (``"Intel(R) Xeon(R) Processor"`` -> ``Intel``, ``"AMD EPYC"`` -> ``AMD``),
    ``unknown`` when it names none (or there is no name: a record made before it stored one)."""
    text = str(model or "").lower()
    return next((vendor for vendor, words in CPU_VENDORS.items() if any(word in text for word in words)), "unknown")


@functools.cache
def cpu_features(cpuinfo: Path = CPUINFO) -> CpuFeatures:
    """This CPU's features, from ``cpuinfo`` when it is readable, else from torch's dispatch capability."""
    try:
        flags, model = parse_cpuinfo(Path(cpuinfo).read_text())
    except OSError:
        flags, model = set(), ""
    if flags:
        return features_from_flags(flags, model, str(cpuinfo))
    import torch

    return features_from_capability(torch.backends.cpu.get_cpu_capability())




# --------------------------------------------------------------------------------------------------
# Cores, GPUs and threads for the grid's cells

# What torch says when a CUDA build of it runs where there is no GPU: that is a CPU machine, not a fault.
NO_CUDA_MESSAGES = ("Found no NVIDIA driver",)


def gpu_devices() -> list[str]:
    """The CUDA devices torch sees: none with a CPU build of torch, with no NVIDIA driver, or with every
    device hidden (``CUDA_VISIBLE_DEVICES=""``). A CUDA build that cannot initialise for another reason
    (a driver too old for it, a broken install) raises RuntimeError rather than quietly turning a GPU grid
    into a CPU one."""
    import torch

    if not torch.backends.cuda.is_built():
        return []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        count = torch.cuda.device_count()  # torch warns "CUDA initialization: ..." and counts 0 on a fault
    problems = [str(w.message) for w in caught if "CUDA" in str(w.message)
                and not any(text in str(w.message) for text in NO_CUDA_MESSAGES)]
    if problems:
        raise RuntimeError(f"torch {torch.__version__} (CUDA {torch.version.cuda}) cannot use CUDA: {problems[0]}; "
                           "mend the driver or install, or hide the GPUs with CUDA_VISIBLE_DEVICES= to run on the CPU")
    return [f"cuda:{i}" for i in range(count)]


DEVICE_NODES = Path("/dev")  # /dev/nvidia0, /dev/nvidia1, ...: one per NVIDIA GPU the driver exposes here


def cuda_devices_without_torch(nodes: Path = DEVICE_NODES) -> list[str] | None:
    """The CUDA devices a process here would see, told without importing torch (seconds), or None when that
    cannot be told so (an AMD machine, whose ROCm torch also calls its GPUs "cuda"). NVIDIA GPUs are the
    driver's ``/dev/nvidiaN`` nodes, narrowed by ``CUDA_VISIBLE_DEVICES`` (empty or starting with -1: none)."""
    if (nodes / "kfd").exists():
        return None
    count = sum(1 for node in nodes.glob("nvidia*") if node.name[len("nvidia"):].isdigit())
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None:
        listed = [entry.strip() for entry in hidden.split(",") if entry.strip()]
        visible = 0 if not listed or listed[0].startswith("-") else len(listed)
        count = min(count, visible)
    return [f"cuda:{i}" for i in range(count)]


def check_device_visible(device: str, nodes: Path = DEVICE_NODES) -> None:
    """ValueError naming the devices that are visible when ``device`` (``cuda``, ``cuda:N``) is not: said before
    any work, where otherwise a run would import torch and fail in CUDA's initialisation seconds later."""
    kind, _, index = str(device).partition(":")
    if kind != "cuda":
        return
    gpus = cuda_devices_without_torch(nodes)
    if gpus is None:
        return
    wanted = f"cuda:{index}" if index else "cuda"
    if gpus and (not index or (index.isdigit() and int(index) < len(gpus))):
        return
    why = ("no GPU is visible here" if not gpus else f"there is no {wanted} here")
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and not gpus:
        why += f" (CUDA_VISIBLE_DEVICES={hidden!r})"
    raise ValueError(f"device={device}: {why}; the devices visible are {', '.join([*gpus, 'cpu'])}: "
                     "set device=auto or one of them")


def gpu_free_memory_gib() -> list[float]:
    """Free memory of each visible CUDA device, in GiB (the device's own count: other processes' use included)."""
    import torch

    return [torch.cuda.mem_get_info(i)[0] / 2**30 for i in range(torch.cuda.device_count())]


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"


def usable_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The cores this process may use: its CPU affinity, capped by a container's CPU quota (cgroup v2
    ``cpu.max``, rounded up), at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota readable: the affinity is the limit
    return max(1, cores)


def choose_workers(requested: int | None, profile_workers: int, cores: int | None = None) -> tuple[int, str | None]:
    """How many cells run at once, and a note saying why when it is not what the profile asks: a profile's
    ``workers`` is capped at the usable cores (a 1-core affinity or container quota runs one cell at a
    time rather than two cells fighting over one core); an explicit ``--workers`` is kept, with a warning
    when it exceeds them."""
    cores = usable_cores() if cores is None else cores
    if requested is not None:
        note = (f"--workers {requested} on {cores} usable core(s): the cells share the cores and each runs slower"
                if requested > cores and not gpu_devices() else None)
        return requested, note
    if profile_workers > cores and not gpu_devices():
        return cores, (f"this machine has {cores} usable core(s) (CPU affinity or container quota): running {cores} "
                       f"cell(s) at once instead of the profile's {profile_workers}")
    return profile_workers, None


def cell_threads(config: RunConfig, workers: int, gpus: list[str]) -> int | None:
    """Torch threads for one cell when several run at once on the CPU: the usable cores, shared out.

    Without it each cell's torch would take every core and the cells would oversubscribe them. On 2 cores,
    two 1-thread cells finish about 1.25x sooner than one 2-thread cell after the other: a small model's
    operations do not split well across threads. None = leave the cell's setting alone.
    """
    if gpus or workers <= 1 or config.num_threads is not None:
        return None
    return max(1, usable_cores() // workers)


@contextlib.contextmanager
def torch_threads(threads: int | None = None):
    """Torch on ``threads`` threads inside the block (None: as it is), and on the count it had on entry
    afterwards: a count left behind would change the numerics of whatever trains next in this process."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")  # those that decide the fast precision


def machine() -> dict:
    """This machine as a reader needs it to judge the numbers: CPU model, cores, the CPU features that
    decide bf16, memory, OS, Python and torch."""
    import torch

    from typhoon.machine import cpu_features, usable_cores

    cpu = cpu_features()

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "cpu": cpu.model or platform.processor() or platform.machine(),
        "cpu_features": [name for name in CPU_FLAGS if getattr(cpu, name)],
        "cores": usable_cores(),
        "memory_gib": _memory_gib(),
        "gpus": gpus,
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def machine_line(info: dict) -> str:
    """One line for a header: ``"Intel Xeon ..., 2 cores (avx512_bf16, ...), 15.6 GiB"``."""
    cores = info.get("cores", "?")
    parts = [f"{info.get('cpu', '?')}, {cores} core{'' if cores == 1 else 's'}"]
    if info.get("cpu_features"):
        parts[0] += f" ({', '.join(info['cpu_features'])})"
    if info.get("memory_gib"):
        parts.append(f"{info['memory_gib']:.0f} GiB")
    if info.get("gpus"):
        parts.append("GPU: " + ", ".join(info["gpus"]))
    return "; ".join(parts)


def _memory_gib() -> float | None:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * size / 2**30, 1)
