"""How long the torch step of `make install` (scripts/install_torch.sh) waits before it knows where torch is.

    python benchmarks/bench_torch_step.py [--repeats 3] [--index-url URL]

Times the step's pip commands in --dry-run mode (nothing is installed), median of the repeats:

1. the local probe, ``pip install --no-index torch==VERSION+cpu``, with pip's config as it is (a machine whose
   pip config names a folder holding that wheel, ``find-links``, finds it there);
2. the same probe where pip has no local wheel (pip's config files switched off, as on an ordinary machine):
   it must fail at once, so the step moves on to PyTorch's index;
3. what the probe avoids: pip asked for torch from PyTorch's index (``--index-url``) when that index cannot be
   reached, with pip's default retries. Run it where the index's host name does not resolve, or give an
   address that refuses connections (``--index-url http://127.0.0.1:9/simple``); a network that drops packets
   instead would wait pip's timeout on every retry.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from lockfiles import makefile_variable  # noqa: E402


def timed(argv: list[str], env: dict) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, proc.returncode


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--index-url", default="https://download.pytorch.org/whl/cpu",
                        help="the index of the third case, out of reach (default: PyTorch's)")
    args = parser.parse_args(argv)
    version = makefile_variable("TORCH_VERSION")
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet"]
    here = dict(os.environ)
    ordinary = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    cases = [
        ("local probe, wheel in pip's find-links", pip + ["--no-index", f"torch=={version}+cpu"], here),
        ("local probe, no local wheel", pip + ["--no-index", f"torch=={version}+cpu"], ordinary),
        ("PyTorch's index, unreachable, pip's default retries",
         pip + [f"torch=={version}+cpu", "--index-url", args.index_url], ordinary),
    ]
    for name, argv, env in cases:
        runs = [timed(argv, env) for _ in range(args.repeats)]
        seconds = statistics.median(s for s, _ in runs)
        codes = sorted({code for _, code in runs})
        print(f"{name:55s} {seconds:6.2f} s  (exit {codes}, median of {args.repeats})")


if __name__ == "__main__":
    main()
