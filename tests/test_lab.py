"""`make lab` and the notebooks a researcher opens in it: the lab starts as root and with no display, the
committed executed notebooks name their run folder from where they lie, and the analysis notebooks find
the committed run when outputs/ has none."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO

from typhoon import paths
from typhoon.runner import notebooks


def lab_command(tmp_path: Path, uid: int, display: str | None = None, *make_args: str) -> list[str]:
    """The jupyter command `make -n lab` prints, with `id -u` answering ``uid`` and ``display`` as $DISPLAY."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (fake_bin / "id").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "IP", "PORT")}
    env["PATH"] = f"{fake_bin}:{env['PATH']}"
    if display is not None:
        env["DISPLAY"] = display
    out = subprocess.run(["make", "-n", "lab", *make_args], cwd=REPO, capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if "jupyter lab" in line]
    assert len(lines) == 1, out.stdout
    return lines[0].split()


@pytest.fixture
def no_make():
    if shutil.which("make") is None:
        pytest.skip("no make here")


def test_lab_as_root_without_a_display_allows_root_and_opens_no_browser(tmp_path, no_make):
    command = lab_command(tmp_path, 0)
    assert "--allow-root" in command and "--no-browser" in command
    assert "--ip=127.0.0.1" in command  # this machine only, unless told


def test_lab_as_a_user_with_a_display_opens_the_browser_and_keeps_root_refused(tmp_path, no_make):
    if os.uname().sysname == "Darwin":
        pytest.skip("macOS always has a browser to open")
    command = lab_command(tmp_path, 1000, ":0")
    assert "--allow-root" not in command and "--no-browser" not in command
    assert "--no-browser" in lab_command(tmp_path, 1000)  # no display


def test_lab_address_is_a_make_variable(tmp_path, no_make):
    command = lab_command(tmp_path, 1000, None, "IP=0.0.0.0", "PORT=8890")
    assert "--ip=0.0.0.0" in command and "--port=8890" in command
    root = next(arg for arg in command if arg.startswith("--ServerApp.root_dir="))
    assert root.split("=", 1)[1] in (".", str(REPO))  # results/ is reachable, not only notebooks/


# --- the analysis notebooks' folders -----------------------------------------------------------------------

@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path)
    return tmp_path


def write_results(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.csv").write_text("task,strategy,seed\nmrpc,random,0\n")
    return folder


def test_a_given_out_dir_is_read_and_written(repo, monkeypatch):
    monkeypatch.chdir(write_results(repo / "results" / "cpu" / "notebooks").parent)
    folders = paths.analysis_folders("..", "cpu")  # relative: from the working directory (the notebook's folder)
    assert folders.results == folders.output == repo / "results"


def test_the_profiles_own_run_comes_first(repo):
    write_results(repo / "results" / "cpu")
    own = write_results(repo / "outputs" / "cpu")
    folders = paths.analysis_folders(None, "cpu")
    assert folders.results == folders.output == own
    assert "outputs/cpu" in folders.note


def test_without_a_run_of_its_own_the_committed_run_is_read_and_nothing_committed_is_written(repo):
    reference = write_results(repo / "results" / "cpu")
    (repo / "outputs" / "cpu").mkdir(parents=True)  # a run started, no results table yet
    folders = paths.analysis_folders(None, "cpu")
    assert folders.results == reference
    assert folders.output == repo / "outputs" / "cpu"
    assert "results/cpu" in folders.note and "make reproduce PROFILE=cpu" in folders.note


def test_no_run_anywhere_names_both_places(repo):
    with pytest.raises(FileNotFoundError) as error:
        paths.analysis_folders(None, "smoke")
    message = str(error.value)
    assert str(repo / "outputs" / "smoke" / "results.csv") in message
    assert str(repo / "results" / "smoke" / "results.csv") in message


@pytest.mark.parametrize("name", ["20_statistics.ipynb", "30_budget_spread.ipynb"])
def test_the_analysis_notebooks_take_their_folders_from_the_package(name):
    import nbformat
    code = "\n".join(cell.source for cell in nbformat.read(REPO / "notebooks" / name, as_version=4).cells
                     if cell.cell_type == "code")
    assert "analysis_folders(out_dir, profile)" in code
    assert re.search(r"stats_dir, fig_dir = folders\.output / ", code)  # never written into the read folder


# --- executed notebooks name their run folder from where they lie ------------------------------------------

def injected_out_dir(notebook: Path) -> str:
    import nbformat
    book = nbformat.read(notebook, as_version=4)
    (cell,) = [c for c in book.cells if "injected-parameters" in c.metadata.get("tags", [])]
    values = re.findall(r'^out_dir = (".*")$', cell.source, re.MULTILINE)
    assert len(values) == 1, cell.source
    assert book.metadata["papermill"]["parameters"]["out_dir"] == json.loads(values[0])
    return json.loads(values[0])


def test_scrub_points_out_dir_at_the_run_from_the_notebooks_folder(tmp_path):
    import nbformat
    out = tmp_path / "run"
    for relative in ("notebooks/20_statistics.ipynb", "notebooks/runs/mrpc/minilm-l6/random/seed0.ipynb"):
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        book = nbformat.v4.new_notebook()
        book.cells = [nbformat.v4.new_code_cell("out_dir = None", metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell(f'# Parameters\nout_dir = "{out}"\nprofile = "cpu"\n',
                                                metadata={"tags": ["injected-parameters"]}),
                      nbformat.v4.new_code_cell(f'print("{out}/stats")')]
        book.metadata["papermill"] = {"parameters": {"out_dir": str(out), "profile": "cpu"}}
        nbformat.write(book, target)
        notebooks.scrub_notebook(target, out)
        assert (target.parent / injected_out_dir(target)).resolve() == out.resolve()
        assert str(out) not in target.read_text()


@pytest.mark.results
def test_committed_notebooks_name_their_run_from_where_they_lie():
    """Every executed notebook under results/ (one check over all of them: a failure lists each notebook that
    names another folder, a run notebook without its record, or an analysis notebook without results.csv)."""
    notebooks_found = sorted((REPO / "results").glob("*/notebooks/**/*.ipynb"))
    if not notebooks_found:
        pytest.skip("no committed run with executed notebooks under results/")
    wrong = []
    for notebook in notebooks_found:
        relative = notebook.relative_to(REPO / "results")
        try:
            run = (notebook.parent / injected_out_dir(notebook)).resolve()
        except (AssertionError, ValueError, KeyError) as error:  # no single injected out_dir to read
            wrong.append(f"{relative}: {type(error).__name__}: {error}")
            continue
        if run != REPO / "results" / relative.parts[0]:
            wrong.append(f"{relative}: out_dir points at {run}")
        elif relative.parts[1:3] == ("notebooks", "runs"):
            # a run's notebook sits beside its record; a study in progress commits records before any
            # results.csv (written when its look ends), so the record is what must be there
            record = run / "runs" / Path(*relative.parts[3:]).with_suffix("") / "metrics.json"
            if not record.is_file():
                wrong.append(f"{relative}: its record {record} is missing")
        elif not (run / "results.csv").is_file():
            wrong.append(f"{relative}: {run} has no results.csv")
    assert not wrong, f"{len(wrong)} of {len(notebooks_found)} committed notebooks:\n" + "\n".join(wrong)


@pytest.mark.slow
@pytest.mark.results
def test_a_committed_analysis_notebook_reruns_where_it_lies(tmp_path):
    """results/smoke/notebooks/20_statistics.ipynb, re-executed in its folder (a copy of the run), with no
    parameters given: it finds the run and makes the committed tables again."""
    import papermill

    reference = REPO / "results" / "smoke"
    if not (reference / "notebooks" / "20_statistics.ipynb").is_file():
        pytest.skip("no committed smoke run")
    run = tmp_path / "smoke"
    shutil.copytree(reference, run, ignore=shutil.ignore_patterns("runs", "stats", "figures"))
    (run / "runs").symlink_to(reference / "runs", target_is_directory=True)  # records are only read
    notebook = run / "notebooks" / "20_statistics.ipynb"
    papermill.execute_notebook(str(notebook), str(notebook), kernel_name=notebooks.KERNEL, progress_bar=False,
                               cwd=str(notebook.parent))
    for name in ("summary.csv", "comparisons.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(run / "stats" / name), pd.read_csv(reference / "stats" / name),
                                      check_exact=False, rtol=1e-12)
