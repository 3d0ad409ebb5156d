"""The core install (``pip install typhoon``, no extra) made from this environment, without a network.

    python scripts/core_site.py FOLDER     # links the core install's packages into FOLDER, lists them

The core requirements are pyproject.toml's ``dependencies`` (the bundle's extra, ``[bundle]``, brings the rest);
with what each needs in turn (its metadata's requirements without extras, markers evaluated here) they are
the distributions a bare ``pip install typhoon`` brings. FOLDER gets a link to each one's top-level modules and
its ``.dist-info``: a Python started with ``-I -S`` and FOLDER (and the repository) on its path sees those
packages and no other, as a fresh virtual environment with the core install would
(tests/test_core_install.py, benchmarks/bench_hf_import.py).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def core_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[Requirement]:
    """pyproject's ``dependencies``: what the package needs without an extra."""
    return [Requirement(line) for line in tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]]


def closure(requirements: list[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """Each distribution the requirements bring, by canonical name, from this environment's metadata (no extra
    of any of them; markers evaluated for this interpreter). LookupError naming one that is not installed."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        try:
            found[name] = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError as error:
            raise LookupError(f"{requirement.name} (needed by the core install) is not installed here") from error
        todo += [Requirement(line) for line in found[name].requires or []]
    return found


def top_level_entries(distribution: importlib.metadata.Distribution) -> set[str]:
    """The files and folders a distribution puts at the top of site-packages (its packages, modules, .dist-info)."""
    entries = set()
    for file in distribution.files or []:
        parts = Path(file).parts
        if parts and parts[0] != ".." and not parts[0].endswith(".pth") and parts[0] != "__pycache__":
            entries.add(parts[0])
    return entries


def link_core_site(folder: Path) -> list[str]:
    """Link the core install's distributions into ``folder``; their ``name==version``, sorted."""
    folder.mkdir(parents=True, exist_ok=True)
    distributions = closure(core_requirements())
    for distribution in distributions.values():
        root = Path(distribution.locate_file(""))
        for entry in top_level_entries(distribution):
            source, link = root / entry, folder / entry
            if source.exists() and not link.exists():
                os.symlink(source, link)
    return sorted(f"{d.metadata['Name']}=={d.version}" for d in distributions.values())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the links go (made if missing)")
    for line in link_core_site(parser.parse_args(argv).folder):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
