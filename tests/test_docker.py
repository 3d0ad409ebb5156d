"""What can be checked of the Docker image without a Docker engine: the build context and the Dockerfile's steps.

The build context is decided by .dockerignore, read here with Docker's rules (patterns are matched against
a path and each of its parent folders; the last matching pattern wins; "!" re-includes).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess

import pytest
from conftest import REPO

from typhoon.config import get_profile
from typhoon.data import BUNDLED_TASKS
from typhoon.models import BACKBONES

DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")


def _pattern_regex(pattern: str) -> re.Pattern:
    """Docker's (Go filepath.Match, plus "**") pattern as a regex over "/"-separated relative paths."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignore_rules() -> list[tuple[bool, re.Pattern]]:
    rules = []
    for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        rules.append((negated, _pattern_regex(line.lstrip("!").strip("/"))))
    return rules


def in_build_context(path: str, rules=None) -> bool:
    rules = dockerignore_rules() if rules is None else rules
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negated, regex in rules:
        if any(regex.match(prefix) for prefix in prefixes):
            excluded = not negated
    return not excluded


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("path", [
    ".venv/bin/python", ".venv/lib/python3.11/site-packages/torch/__init__.py", "outputs/runs/mrpc/x/metrics.json",
    "outputs/README.md", "typhoon/__pycache__/data.cpython-311.pyc", "tests/__pycache__/conftest.cpython-311.pyc",
    ".pytest_cache/v/cache/nodeids", ".ruff_cache/0.17.6/123", ".hypothesis/examples/x",
    "notebooks/.ipynb_checkpoints/00_setup-checkpoint.ipynb", "typhoon.egg-info/PKG-INFO", "build/lib/typhoon/data.py",
    "typhoon/glue_data/RTE/train.tsv",  # a task `data fetch` added is a local download, not the bundle
])
def test_environments_results_and_caches_stay_out(path):
    assert not in_build_context(path)


def test_every_tracked_file_but_outputs_is_in_the_context():
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    rules = dockerignore_rules()
    left_out = [path for path in tracked if not path.startswith("outputs/") and not in_build_context(path, rules)]
    assert left_out == []
    assert in_build_context("typhoon/glue_data/MRPC/train.tsv", rules)


def test_copy_sources_exist_and_run_steps_use_only_what_was_copied():
    copied = []
    for instruction, args in instructions():
        if instruction == "COPY":
            *sources, _ = shlex.split(args)
            for source in sources:
                assert (REPO / source).exists(), f"COPY {source}: no such path in the repository"
                assert source == "." or in_build_context(source), f"COPY {source}: .dockerignore leaves it out"
            copied += sources
        if instruction == "RUN":
            for path in re.findall(r"\b(?:scripts|requirements)/[\w./-]+", args):
                assert (REPO / path).is_file(), f"RUN uses {path}, which does not exist"
                assert path in copied or "." in copied, f"RUN uses {path} before it is copied"


def test_runtime_image_installs_the_runtime_lock_and_no_dev_tools():
    runs = " ".join(args for instruction, args in instructions() if instruction == "RUN")
    assert "--require-hashes --no-deps -r requirements/runtime.txt" in runs
    assert "requirements/dev.txt" not in DOCKERFILE and '".[dev]"' not in DOCKERFILE and "[dev]" not in runs
    assert re.search(r"^ARG TORCH_VARIANT=cpu$", DOCKERFILE, re.MULTILINE)  # a CPU image unless asked


def test_default_command_reproduces_offline_from_the_bundle():
    """`docker run typhoon-bundle` with no mount: its profile needs only bundled data and offline backbones."""
    cmd = dict(instructions())["CMD"]
    argv = json.loads(cmd)
    assert argv[:4] == ["python", "-m", "typhoon", "reproduce"]
    profile = argv[argv.index("--profile") + 1]
    cells = get_profile(profile).grid()
    assert {cell.task for cell in cells} <= set(BUNDLED_TASKS)
    assert all(BACKBONES[cell.backbone].offline for cell in cells)
    assert re.search(r"^\s*HF_HUB_OFFLINE=1", DOCKERFILE, re.MULTILINE)


def test_gpu_and_paper_commands_are_documented_with_real_arguments():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    build_args = set(re.findall(r"^ARG (\w+)=", DOCKERFILE, re.MULTILINE))
    for text in (readme, DOCKERFILE):
        used = set(re.findall(r"--build-arg (\w+)=", text))
        assert used and used <= build_args, used
        assert "--gpus all" in text and "--profile paper" in text
        # the image is offline by default: a paper run must say how the hub backbones get in
        assert "HF_HUB_OFFLINE=0" in text and "/root/.cache/huggingface" in text
