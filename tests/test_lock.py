"""The locks (requirements/*.txt) cover pyproject.toml and are complete, and every installer agrees with them.

The installers are the Makefile (`make install`), the Dockerfile and environment.yml. torch is not in the
locks (its build differs per machine); its version is stated in each installer and in pyproject's [tool.uv].
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from packaging.markers import Marker
from packaging.requirements import Requirement

_spec = importlib.util.spec_from_file_location("lockfiles", REPO / "scripts" / "lockfiles.py")
lockfiles = sys.modules["lockfiles"] = importlib.util.module_from_spec(_spec)  # a script, not a package module
_spec.loader.exec_module(lockfiles)

RUNTIME, DEV = lockfiles.read_lock(lockfiles.RUNTIME_LOCK), lockfiles.read_lock(lockfiles.DEV_LOCK)
DEV_TOOLS = {"pytest", "ruff", "hypothesis", "uv"}  # must never reach the runtime image


def project(repo: Path = REPO) -> dict:
    return tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))


def requirements(extra: str | None = None) -> dict[str, Requirement]:
    table = project()["project"]
    listed = table["dependencies"] if extra is None else table["optional-dependencies"][extra]
    return {lockfiles.normalize(req.name): req for req in map(Requirement, listed)}


def applies_here(pin) -> bool:
    return not pin.marker or Marker(pin.marker).evaluate()


# --------------------------------------------------------------------------------------------------
# The locks against pyproject.toml


@pytest.mark.parametrize("lock, extras", [(RUNTIME, ("bundle",)), (DEV, ("bundle", "dev"))], ids=["runtime", "dev"])
def test_lock_covers_pyproject(lock, extras):
    """Every requirement has a pin inside its range, and everything pinned as a direct requirement still is one."""
    wanted = requirements() | {name: req for extra in extras for name, req in requirements(extra).items()}
    torch = wanted.pop("torch")
    for name, req in wanted.items():
        assert name in lock, f"{name} is in pyproject.toml but not in the lock: run `make lock`"
        assert req.specifier.contains(lock[name].version, prereleases=True), (name, str(req), lock[name].version)
    direct = {name for name, pin in lock.items() if lockfiles.PROJECT_ROOT in pin.via}
    assert direct == set(wanted), "the lock's direct requirements differ from pyproject.toml: run `make lock`"
    assert torch.specifier.contains(lockfiles.makefile_variable("TORCH_VERSION"))


@pytest.mark.parametrize("lock", [RUNTIME, DEV], ids=["runtime", "dev"])
def test_every_pin_is_exact_hashed_and_needed(lock):
    for name, pin in lock.items():
        assert pin.hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in pin.hashes), name
    # reachable from the project through uv's "# via" annotations: nothing left over from an old pyproject
    needed, grew = {lockfiles.PROJECT_ROOT, "torch"}, True
    while grew:
        new = {name for name, pin in lock.items() if name not in needed and needed.intersection(pin.via)}
        needed |= new
        grew = bool(new)
    assert set(lock) <= needed, sorted(set(lock) - needed)


def test_locks_leave_torch_and_cuda_to_the_torch_step():
    """No torch, and none of a CUDA build's packages: the locks install the same everywhere, CPU or GPU."""
    for lock in (RUNTIME, DEV):
        assert not [name for name in lock if name == "torch" or name.startswith(("nvidia-", "cuda-", "triton"))]


def test_dev_lock_extends_runtime_lock_and_runtime_has_no_dev_tools():
    assert {name: pin.version for name, pin in DEV.items() if name in RUNTIME} == \
        {name: pin.version for name, pin in RUNTIME.items()}
    assert set(RUNTIME) <= set(DEV)
    assert DEV_TOOLS <= set(DEV) and not DEV_TOOLS & set(RUNTIME)


@pytest.mark.parametrize("lock", [RUNTIME, DEV], ids=["runtime", "dev"])
def test_lock_is_closed_under_dependencies(lock):
    """Installing a lock with --no-deps is complete: each installed pin's requirements (from its metadata) are
    satisfied by other pins of the same lock, or by torch."""
    checked = 0
    for name, pin in lock.items():
        if not applies_here(pin):
            continue
        try:
            if importlib.metadata.version(name) != pin.version:
                continue  # metadata of another version says nothing about this pin
        except importlib.metadata.PackageNotFoundError:
            continue
        checked += 1
        for req in map(Requirement, importlib.metadata.requires(name) or []):
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            dep = lockfiles.normalize(req.name)
            assert dep == "torch" or dep in lock, f"{name} needs {req}, which the lock lacks"
            version = lockfiles.makefile_variable("TORCH_VERSION") if dep == "torch" else lock[dep].version
            assert req.specifier.contains(version, prereleases=True), (name, str(req), version)
    assert checked, "no pin of this lock is installed here at its locked version"


def test_stated_torch_metadata_is_the_cpu_wheels():
    """uv resolves the locks with the torch requirements stated in pyproject.toml: they must be the real ones."""
    stated = project()["tool"]["uv"]["dependency-metadata"]
    assert [entry["name"] for entry in stated] == ["torch"]
    installed = importlib.metadata.version("torch")
    if installed.split("+")[0] != stated[0]["version"]:
        pytest.skip(f"torch {installed} installed, not {stated[0]['version']}")
    real = [r for r in importlib.metadata.requires("torch") if "extra ==" not in r]
    assert sorted(map(str, map(Requirement, stated[0]["requires-dist"]))) == sorted(map(str, map(Requirement, real)))


# --------------------------------------------------------------------------------------------------
# The three installers agree with the locks


def agreement_problems(repo: Path) -> list[str]:
    """Every way the Makefile, Dockerfile, environment.yml and pyproject.toml disagree with the locks in ``repo``."""
    problems = []
    makefile = (repo / "Makefile").read_text(encoding="utf-8")
    dockerfile = (repo / "Dockerfile").read_text(encoding="utf-8")
    environment = yaml.safe_load((repo / "environment.yml").read_text(encoding="utf-8"))
    uv = project(repo)["tool"]["uv"]

    torch = lockfiles.makefile_variable("TORCH_VERSION", repo / "Makefile")
    stated = {"pyproject [tool.uv] constraint": uv["constraint-dependencies"] == [f"torch=={torch}"],
              "pyproject [tool.uv] dependency-metadata": uv["dependency-metadata"][0]["version"] == torch,
              "Dockerfile ARG TORCH_VERSION": f"ARG TORCH_VERSION={torch}\n" in dockerfile}
    problems += [f"{where} does not say torch {torch} (the Makefile's TORCH_VERSION)" for where, ok in stated.items()
                 if not ok]

    python = lockfiles.locked_python(repo / "Makefile")
    # the default base image (a build argument: a local base may stand in for it)
    base = re.search(r"^ARG BASE_IMAGE=python:(\d+\.\d+)[.\d]*-", dockerfile, re.MULTILINE)
    if base is None or base.group(1) != python:
        problems.append(f"the Dockerfile's base image is not Python {python} (the locks' --python-version)")

    for where, text, lock in (("Makefile", makefile, "dev"), ("Dockerfile", dockerfile, "runtime")):
        if not re.search(rf"pip install[^\n]* --require-hashes --no-deps -r requirements/{lock}\.txt", text):
            problems.append(f"the {where} does not install requirements/{lock}.txt with --require-hashes --no-deps")
        if "install_torch.sh" not in text:
            problems.append(f"the {where} does not install torch with scripts/install_torch.sh")
    if re.search(r"pip install[^\n]*\b[A-Za-z][\w.-]*\s*[<>=~!]=", dockerfile):
        problems.append("the Dockerfile pins a package itself instead of taking it from the lock")

    conda = [dep for dep in environment["dependencies"] if isinstance(dep, str)]
    if f"python={python}" not in conda:
        problems.append(f"environment.yml does not ask for python={python}")
    pip = next(dep["pip"] for dep in environment["dependencies"] if isinstance(dep, dict))
    pins = {line for line in pip if not line.startswith(("-", "torch=="))}
    if f"torch=={torch}" not in pip:
        problems.append(f"environment.yml does not install torch=={torch}")
    locked = {pin.requirement() for pin in lockfiles.read_lock(repo / "requirements" / "dev.txt").values()}
    problems += [f"environment.yml has {line!r}, which is not in the dev lock" for line in sorted(pins - locked)]
    problems += [f"environment.yml lacks the dev lock's {line!r}" for line in sorted(locked - pins)]
    return problems


def test_installers_agree_with_the_locks():
    assert agreement_problems(REPO) == []


def test_agreement_check_sees_drift(tmp_path):
    """The check above can fail: a version changed in one installer, or an installer off the lock, is reported."""
    for name in ("Makefile", "Dockerfile", "environment.yml", "pyproject.toml", "requirements"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, tmp_path / name)
    env, docker = tmp_path / "environment.yml", tmp_path / "Dockerfile"
    numpy = DEV["numpy"].requirement()
    env.write_text(env.read_text().replace(f"- {numpy}\n", f"- {numpy}.post1\n"))
    docker.write_text(docker.read_text().replace("ARG TORCH_VERSION=", "ARG TORCH_VERSION=9").replace(
        "requirements/runtime.txt\n", "requirements/runtime.txt \"numpy==1.0\"\n"))
    problems = "\n".join(agreement_problems(tmp_path))
    assert f"'{numpy}.post1', which is not in the dev lock" in problems
    assert f"lacks the dev lock's '{numpy}'" in problems
    assert "Dockerfile ARG TORCH_VERSION does not say torch" in problems
    assert "the Dockerfile pins a package itself" in problems


def test_environment_yml_is_what_make_lock_writes():
    rendered = lockfiles.render_environment(lockfiles.DEV_LOCK, lockfiles.makefile_variable("TORCH_VERSION"),
                                            lockfiles.locked_python())
    assert (REPO / "environment.yml").read_text(encoding="utf-8") == rendered


def test_the_uv_requirement_make_install_writes_is_the_locks_uv_block(capsys):
    """`make install` installs uv alone, hash-checked, from `lockfiles.py requirement uv`: its version and hashes
    are those of the lock's own uv block, read here straight from the text; an unknown package is refused."""
    text = (REPO / "requirements" / "dev.txt").read_text(encoding="utf-8")
    block = re.search(r"^uv==(\S+) \\\n((?:\s+--hash=\S+(?: \\)?\n)+)", text, flags=re.M)
    assert lockfiles.main(["requirement", "uv"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"uv=={block.group(1)} ")
    assert re.findall(r"--hash=(\S+)", line) == re.findall(r"--hash=([^\s\\]+)", block.group(2))
    assert lockfiles.main(["requirement", "no-such"]) == 2
    assert "dev.txt has no pin for 'no-such'" in capsys.readouterr().err
    assert "scripts/lockfiles.py requirement uv > $(VENV)/uv-requirement.txt" in (REPO / "Makefile").read_text()
