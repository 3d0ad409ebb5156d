"""The software a record was made with: the package's git commit and the library versions, written into
every record's ``metrics.json`` and shown in the report's set-up table; and the version of the package's own
code that a resume state and a kept calibration must match (:func:`code_version`)."""

from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
from pathlib import Path

import typhoon


def git_commit() -> str | None:
    """The commit checked out where the package lies, or None outside a git checkout (an installed wheel)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(typhoon.__file__).parent,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def library_versions() -> dict:
    """Python's and the training libraries' versions (imported here: they are loaded by then in a run)."""
    import datasets
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "datasets": datasets.__version__,
            "typhoon": typhoon.__version__}


@functools.cache  # the sources do not change under a running process
def code_version() -> str:
    """The package's version and a hash of its sources (every ``.py`` file and the profiles, by path and
    bytes): any edit of the code changes it, so a resume state (:mod:`typhoon.training.resume`) or a kept
    calibration (:mod:`typhoon.runner.calibration_cache`) made by other code is not used. A few ms."""
    root = Path(typhoon.__file__).parent
    digest = hashlib.sha256(typhoon.__version__.encode())
    for path in sorted([*root.rglob("*.py"), *root.glob("*.toml")]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{typhoon.__version__}+{digest.hexdigest()[:16]}"
