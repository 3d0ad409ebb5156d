"""Process-level settings that make CPU training faster without changing what is computed.

Each is measured A/B, interleaved, in ``benchmarks/bench_cell_phases.py``, and :func:`configure` keeps
it only where it wins; the choices go into the run record (``metrics["speed"]``).

- **malloc** (:func:`tune_malloc`): glibc serves allocations above its mmap threshold (dynamic, at
  most 32 MiB) with fresh ``mmap`` pages and unmaps them on free. A training step allocates and frees
  the same large buffers every time (activations, the 47 MB word-embedding gradient of MiniLM), so
  every step page-faults them in again and the kernel zeroes them: 20-200 thousand minor faults and
  5-10 % of a step's CPU time spent in the kernel (measured on MiniLM-L6). Disabling mmap for
  allocations and not trimming the heap keeps those pages in the process. Same results bit for bit;
  the process keeps its peak memory instead of returning it.
"""

from __future__ import annotations

import ctypes
import functools
import platform

# glibc mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_MAX = -4
TRIM_THRESHOLD = 1 << 30  # give memory back to the kernel only when 1 GiB at the heap's top is free
TOP_PAD = 64 << 20  # grow the heap 64 MiB at a time


@functools.cache
def tune_malloc() -> str:
    """Keep freed memory in the process (glibc only; once per process). Returns what was done:
    ``"tuned"``, or why not (``"default: not glibc"`` on macOS, Windows or musl)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "default: not glibc"
    libc = ctypes.CDLL("libc.so.6")
    settings = ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    failed = [param for param, value in settings if libc.mallopt(param, value) != 1]
    if failed:  # mallopt returns 1 on success
        return f"default: mallopt refused parameters {failed}"
    return "tuned"


def configure(device_type: str, malloc: str = "auto") -> dict:
    """Apply the process-level settings that win on this device; returns the choices for the record.

    ``malloc``: ``auto`` (tuned on CPU, where the faults cost; on GPU the big buffers live in the
    device's caching allocator), ``tuned`` or ``default``.
    """
    if malloc not in ("auto", "tuned", "default"):
        raise ValueError(f"unknown malloc setting {malloc!r}; choose one of ('auto', 'tuned', 'default')")
    if malloc == "default" or (malloc == "auto" and device_type != "cpu"):
        # mallopt settings last for the process: say so if an earlier run in it tuned them
        return {"malloc": "tuned earlier in this process" if tune_malloc.cache_info().currsize else "default"}
    return {"malloc": tune_malloc()}
