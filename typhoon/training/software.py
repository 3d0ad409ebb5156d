"""The software a record was made with: the package's git commit and the library versions, written into
every record's ``metrics.json`` and shown in the report's set-up table."""

from __future__ import annotations

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
