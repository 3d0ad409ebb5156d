"""The docs' shell commands, run as written, from a folder of the reader's own outside the repository.

A page marks what a reader can run as it stands: `<!-- docs test: runs as written -->` before a fenced shell block,
`<!-- docs test: file NAME -->` before a block the reader saves as NAME in their folder (a strategy's module, a
profiles file). The other shell blocks need what a test has not (make in the repository, docker, a network, a
synopsis with placeholders). Each marked block's commands run in a temporary folder outside the repository with
the bundle's environment active (its `.venv/bin` first on PATH, as `source .venv/bin/activate` does), and must
exit 0 and write into that folder, not into the repository. The commands train (smoke-sized cells, a few
minutes on two cores), so the test is slow; the count of blocks is checked here, so a marker that goes away
fails."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKED = re.compile(r"<!-- docs test: (runs as written|file (\S+)) -->\n```(\w*)\n(.*?)^```[ \t]*$", re.S | re.M)
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell|console)\n", re.M)
RUNNABLE_BLOCKS = 4  # docs/extending.md: the plugin strategy's `run`, its grid's `reproduce`, a study of one's own,
# a task and a backbone name of one's own


def marked_blocks() -> tuple[list[tuple[Path, str]], list[tuple[Path, str, str]]]:
    """(page, commands) of each runnable block and (page, file name, text) of each file block, in page order."""
    runnable, files = [], []
    for page in PAGES:
        for _what, name, _lang, body in MARKED.findall(page.read_text(encoding="utf-8")):
            if name:
                files.append((page, name, body))
            else:
                runnable.append((page, body))
    return runnable, files


def commands_of(block: str) -> list[str]:
    """A shell block's commands, one per line (a line continued with a backslash joined to the next)."""
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_runnable_blocks_are_counted():
    runnable, files = marked_blocks()
    shell = sum(len(SHELL_BLOCK.findall(page.read_text(encoding="utf-8"))) for page in PAGES)
    assert len(runnable) == RUNNABLE_BLOCKS, [page.name for page, _ in runnable]
    assert sorted(name for _, name, _ in files) == ["my_masking.py", "my_profiles.toml", "my_study.py", "my_study_profiles.toml",
                                                    "my_task.toml", "reviews_dev.csv", "reviews_train.csv"]
    assert shell > len(runnable)  # the others need make, docker, podman, a network or placeholders
    print(f"{len(runnable)} of the docs' {shell} shell blocks run as written "
          f"({sum(len(commands_of(b)) for _, b in runnable)} commands), with {len(files)} files the pages give")


@pytest.mark.slow  # trains: one smoke-sized cell, then a 4-cell grid and its notebooks, a 6-cell study, a cell of a task of one's own
def test_the_docs_commands_run_as_written_from_a_folder_outside_the_repository(tmp_path):
    runnable, files = marked_blocks()
    folder = tmp_path / "my-work"
    folder.mkdir()
    assert REPO not in folder.resolve().parents
    for _page, name, text in files:
        (folder / name).write_text(text, encoding="utf-8")
    venv_bin = Path(sys.executable).parent  # the bundle's environment, activated
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv_bin.parent)}
    repo_outputs = sorted(p.name for p in (REPO / "outputs").iterdir()) if (REPO / "outputs").is_dir() else []
    ran = 0
    for page, block in runnable:
        for command in commands_of(block):
            done = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=900)
            assert done.returncode == 0, f"{page.name}: {command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            ran += 1
    assert ran >= 3
    # what the pages say they make is in the reader's folder, and nothing new appeared in the repository's outputs/
    assert (folder / "my-runs/runs/mrpc/tiny-random/long_words/seed0/metrics.json").is_file()
    assert len(list((folder / "long-words" / "runs").glob("mrpc/tiny-random/*/seed*/metrics.json"))) == 4
    assert (folder / "long-words" / "report.html").is_file()
    record = folder / "review-runs/runs/reviews/my-tiny/random/seed0"
    config, metrics = (json.loads((record / name).read_text()) for name in ("config.json", "metrics.json"))
    assert config["backbone_source"] == "tiny-random" and metrics["n_dev"] == 12  # the page's dev file: 12 reviews
    assert config["task_declaration"]["sha256"]["train"] == hashlib.sha256((folder / "reviews_train.csv").read_bytes()).hexdigest()
    now = sorted(p.name for p in (REPO / "outputs").iterdir()) if (REPO / "outputs").is_dir() else []
    assert now == repo_outputs
