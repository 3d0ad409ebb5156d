"""pyproject.toml, environment.yml and the Dockerfile install the same package set; CI runs the README's command."""

import re
import tomllib

from conftest import REPO


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _normalize(requirements) -> dict[str, str]:
    return {_name(r): r.replace(" ", "") for r in requirements}


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return _normalize(project["dependencies"] + project["optional-dependencies"]["dev"])


def environment_requirements() -> dict[str, str]:
    lines = (REPO / "environment.yml").read_text().splitlines()
    start = lines.index("  - pip:")
    pip = [line.strip()[2:] for line in lines[start + 1:] if line.startswith("      - ")]
    return _normalize(r for r in pip if r != "-e .")


def docker_requirements() -> dict[str, str]:
    text = (REPO / "Dockerfile").read_text()
    found = re.findall(r'"([A-Za-z0-9_.\-]+(?:[<>=!~]=?[^"\s]+)?)"', text)
    torch = re.search(r"ARG TORCH=(\S+)", text).group(1)
    return _normalize([torch, *(r for r in found if any(op in r for op in "<>=") and not r.startswith("$"))])


def test_three_package_sets_agree():
    py, env, docker = pyproject_requirements(), environment_requirements(), docker_requirements()
    assert set(py) == set(env) == set(docker)
    for name in py:
        if name == "torch":  # pyproject admits a range; the environments pin the CPU wheel inside it
            assert env[name] == docker[name] == "torch==2.13.0"
            continue
        assert py[name] == env[name] == docker[name], name


def test_torch_is_installed_first_and_pinned():
    makefile = (REPO / "Makefile").read_text()
    install = makefile[makefile.index("$(VENV)/.installed:"):]
    assert install.index('"$(TORCH)"') < install.index('-e ".[dev]"')
    assert "TORCH ?= torch==2.13.0" in makefile


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "make test" in readme and "make reproduce" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text()
