"""What can be checked of the Docker image without a Docker engine: the build context and the Dockerfile's steps.

The build context is decided by .dockerignore, read here with Docker's rules (patterns are matched against
a path and each of its parent folders; the last matching pattern wins; "!" re-includes).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest
from conftest import REPO

from typhoon.data.glue_files import BUNDLED_TASKS
from typhoon.profiles import get_profile

DOCKERFILE = (REPO / "Dockerfile").read_text(encoding="utf-8")
DOCKER_DOCS = REPO / "docs" / "docker.md"  # the Docker page of the manual, which the README links


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
    from typhoon.models.backbones import BACKBONES
    cmd = dict(instructions())["CMD"]
    argv = json.loads(cmd)
    assert argv[:4] == ["python", "-m", "typhoon", "reproduce"]
    profile = argv[argv.index("--profile") + 1]
    cells = get_profile(profile).grid()
    assert {cell.task for cell in cells} <= set(BUNDLED_TASKS)
    assert all(BACKBONES[cell.backbone].offline for cell in cells)
    assert re.search(r"^\s*HF_HUB_OFFLINE=1", DOCKERFILE, re.MULTILINE)


def test_gpu_and_paper_commands_are_documented_with_real_arguments():
    docs = DOCKER_DOCS.read_text(encoding="utf-8")
    build_args = set(re.findall(r"^ARG (\w+)=", DOCKERFILE, re.MULTILINE))
    for text in (docs, DOCKERFILE):
        used = set(re.findall(r"--build-arg (\w+)=", text))
        assert used and used <= build_args, used
        assert "--gpus all" in text and "--profile paper" in text
        # the image is offline by default: a paper run must say how the hub backbones get in
        assert "HF_HUB_OFFLINE=0" in text and image_env()["HF_HOME"] in text


def image_env() -> dict[str, str]:
    """The image's ENV settings, by name."""
    env = {}
    for instruction, args in instructions():
        if instruction == "ENV":
            env.update(item.split("=", 1) for item in shlex.split(args))
    return env


def test_the_base_image_is_a_build_argument():
    """A registry may be unreachable: `--build-arg BASE_IMAGE=<a local image>` must stand in for the default."""
    steps = instructions()
    first_from = next(i for i, (instruction, _) in enumerate(steps) if instruction == "FROM")
    declared = [args for instruction, args in steps[:first_from] if instruction == "ARG"]
    assert any(re.fullmatch(r"BASE_IMAGE=python:3\.11[\w.-]*", args) for args in declared), declared
    assert steps[first_from][1] in ("${BASE_IMAGE}", "$BASE_IMAGE")
    # a plain Debian base has no pip of its own to install into: the packages go into a venv on PATH
    assert "python3 -m venv" in " ".join(args for instruction, args in steps if instruction == "RUN")
    assert image_env()["PATH"].startswith(image_env()["VIRTUAL_ENV"] + "/bin:")


def test_it_runs_as_a_non_root_user_whose_uid_is_a_build_argument():
    steps = instructions()
    args = dict(arg.split("=", 1) for instruction, arg in steps if instruction == "ARG" and "=" in arg)
    assert "UID" in args and "GID" in args and args["UID"] != "0"
    users = [arg for instruction, arg in steps if instruction == "USER"]
    assert users and users[-1] == "${UID}:${GID}"  # the last USER is the one `docker run` gets
    runs = " ".join(arg for instruction, arg in steps if instruction == "RUN")
    assert re.search(r'useradd .*--uid "\$UID" --gid "\$GID"', runs)


def test_any_uid_can_write_its_home_and_every_cache():
    """`docker run --user <host uid>`: a uid with no passwd entry must still find HOME and the caches of
    matplotlib, IPython, Jupyter and Hugging Face writable (all under HOME, which is world-writable)."""
    env = image_env()
    home = env["HOME"]
    assert home != "/root"
    for name in ("XDG_CACHE_HOME", "HF_HOME", "MPLCONFIGDIR", "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                 "JUPYTER_RUNTIME_DIR"):
        assert os.path.commonpath([env[name], home]) == home, name
    runs = " ".join(arg for instruction, arg in instructions() if instruction == "RUN")
    assert re.search(r'chmod 1777 "\$HOME" /bundle/outputs', runs)
    assert "safe.directory" in runs  # git reads the root-owned checkout's commit for the run records


def test_default_command_writes_the_cpu_profile_into_outputs_cpu():
    """As everywhere else: the package installed (editable) from the checkout in WORKDIR, so its default output
    folder is <WORKDIR>/outputs/cpu, and the documented mount is <WORKDIR>/outputs."""
    steps = instructions()
    argv = json.loads(dict(steps)["CMD"])
    assert argv[argv.index("--profile") + 1] == "cpu"
    assert "--out" not in argv  # the default: paths.output_dir("cpu") of the checkout the package runs from
    workdir = dict(steps)["WORKDIR"]
    assert ("COPY", f". {workdir}") in steps
    assert 'pip install --no-deps --no-build-isolation -e ".[bundle]"' in " ".join(a for i, a in steps if i == "RUN")
    docs = DOCKER_DOCS.read_text(encoding="utf-8")
    for text in (DOCKERFILE, docs):
        mounts = set(re.findall(r'-v "\$PWD/outputs:([^"\s]+)"', text))
        assert mounts == {f"{workdir}/outputs"}, mounts


def test_the_builders_torch_wheel_and_ca_bundle_are_optional_and_never_in_the_image():
    """A local torch wheel comes in by URL (TORCH_FIND_LINKS, pip's find-links) and a proxy's CA bundle as a
    build secret: neither is in the build context, so neither can land in a layer; without them the pip
    steps use PyPI and PyTorch's index."""
    steps = instructions()
    pip_steps = [args for instruction, args in steps
                 if instruction == "RUN" and ("requirements/runtime.txt" in args or "install_torch.sh" in args)]
    assert len(pip_steps) == 2
    for args in pip_steps:
        assert args.startswith("--mount=type=secret,id=pip-cert ")
        assert "if [ -f /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi" in args
    assert ("ARG", "TORCH_FIND_LINKS=") in steps  # empty by default
    assert '${TORCH_FIND_LINKS:+PIP_FIND_LINKS="$TORCH_FIND_LINKS"}' in pip_steps[1]
    # declared after the lock's step, so a changed URL keeps the lock's layer cached
    assert steps.index(("ARG", "TORCH_FIND_LINKS=")) > steps.index(next(s for s in steps if s[1] == pip_steps[0]))


def fake_python(tmp_path, local_error: str):
    """A "python" whose `pip install --no-index` fails with ``local_error`` and whose index install succeeds."""
    script = tmp_path / "python"
    script.write_text(f"""#!/bin/sh
case " $* " in
    *" --no-index "*) echo "Looking in links: /nowhere"; echo {shlex.quote(local_error)} >&2; exit 1 ;;
    *) echo "index install: $*"; exit 0 ;;
esac
""")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("local_error", [
    "ERROR: No matching distribution found for torch==2.13.0+cpu",
    "ERROR: torch-2.13.0+cpu-cp312-cp312-linux_x86_64.whl is not a supported wheel on this platform.",
])
def test_install_torch_says_why_the_local_wheel_failed_then_falls_back(tmp_path, local_error):
    python = fake_python(tmp_path, local_error)
    out = subprocess.run(["bash", str(REPO / "scripts" / "install_torch.sh"), str(python), "2.13.0", "cpu", "--dry-run"],
                         capture_output=True, text=True, timeout=60, env={**os.environ, "TORCH_INDEX": "https://idx"})
    assert out.returncode == 0, out.stderr
    assert local_error in out.stderr  # pip's own words, not hidden
    assert "index install: -m pip install torch==2.13.0+cpu --index-url https://idx --dry-run" in out.stdout


def test_make_docker_builds_for_the_user_and_takes_a_base_image():
    try:
        out = subprocess.run(["make", "-n", "--no-print-directory", "docker", "DOCKER=podman",
                              "BASE_IMAGE=typhoon-base:bookworm"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    except OSError:
        pytest.skip("no make here")
    command = " ".join(out.stdout.replace("\\\n", " ").split())
    assert command.startswith("podman build ") and "--build-arg BASE_IMAGE=typhoon-base:bookworm" in command
    as_user = f"--build-arg UID={os.getuid()} --build-arg GID={os.getgid()}"
    assert (as_user in command) == (os.getuid() != 0)  # root keeps the image's non-root default
