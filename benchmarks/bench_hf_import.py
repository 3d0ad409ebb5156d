"""How long ``from typhoon.hf import masking_collator, TyphoonCallback, TyphoonTrainer`` takes in a fresh process,
and what it imports: the package at an older commit in this full environment, this checkout in the full
environment, and this checkout with the core install only (scripts/core_site.py: pyproject's dependencies, no
extra).

    python benchmarks/bench_hf_import.py [--old bf1f7a8] [--repeats 7] [--arms old full core]

Each measurement is a fresh ``python -I -S`` whose path holds one package tree and one set of packages (the
editable install's finder is not used); the time is that of the import statement alone (torch and transformers
included: TyphoonTrainer loads transformers' Trainer), not the interpreter's start. The three arms run in turn,
``repeats`` times, and the median of each is printed with the bundle-only modules the import loaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from typhoon import machine

REPO = Path(__file__).resolve().parents[1]
ARMS = ("old", "full", "core")  # the older commit in the full environment; this checkout in it; in the core install
HEAVY = ("pandas", "scipy", "sklearn", "datasets", "pyarrow", "matplotlib", "PIL", "IPython", "nbformat", "papermill")

TIMED = """
import json, site, sys, time
for entry in {sites!r}:
    site.addsitedir(entry)
sys.path.insert(0, {root!r})
started = time.perf_counter()
from typhoon.hf import masking_collator, TyphoonCallback, TyphoonTrainer
took = time.perf_counter() - started
import typhoon
assert typhoon.__file__.startswith({root!r}), typhoon.__file__
print(json.dumps({{"seconds": took, "heavy": [m for m in {heavy!r} if m in sys.modules],
                   "modules": len(sys.modules)}}))
"""


def load_core_site():
    spec = importlib.util.spec_from_file_location("core_site", REPO / "scripts" / "core_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(root: Path, sites: list[str]) -> dict:
    code = TIMED.format(sites=sites, root=str(root), heavy=HEAVY)
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=600,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        raise SystemExit(f"the import failed under {root}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="bf1f7a8", help="the commit to compare with (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="which to time (default: all)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        old = scratch / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.old, "typhoon"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        full = [sysconfig.get_paths()["purelib"]]
        core = scratch / "core"
        installed = load_core_site().link_core_site(core)
        every = {"old": (f"{args.old}, full environment", old, full),
                 "full": ("this checkout, full environment", REPO, full),
                 "core": ("this checkout, core install", REPO, [str(core)])}
        arms = {every[arm][0]: every[arm][1:] for arm in ARMS if arm in args.arms}
        runs: dict[str, list[dict]] = {name: [] for name in arms}
        for _ in range(args.repeats):
            for name, (root, sites) in arms.items():
                runs[name].append(measure(root, sites))

    print(machine.machine_line(machine.machine()))
    print(f"core install ({len(installed)} distributions): {' '.join(installed)}")
    print(f"{'arm':<34} {'median s':>9} {'min s':>7} {'modules':>8}  bundle-only modules imported")
    for name, results in runs.items():
        seconds = [r["seconds"] for r in results]
        print(f"{name:<34} {statistics.median(seconds):9.2f} {min(seconds):7.2f} {results[0]['modules']:8d}  "
              f"{', '.join(results[0]['heavy']) or 'none'}")


if __name__ == "__main__":
    main()
