"""Where outputs go by default (one folder per profile, found from the package, whatever the working
directory) and how paths are shown to a reader (never this machine's absolute folders)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from typhoon import paths


def test_each_profile_has_its_own_output_folder_in_the_repository():
    assert paths.repo_root() == REPO
    assert paths.output_dir("cpu") == REPO / "outputs" / "cpu"
    assert paths.output_dir("smoke") == REPO / "outputs" / "smoke"
    assert paths.reference_dir("cpu") == REPO / "results" / "cpu"
    assert paths.resolve_out_dir(None, "smoke") == REPO / "outputs" / "smoke"
    assert paths.resolve_out_dir("somewhere", "smoke") == Path("somewhere").resolve()
    for bad in ("", "../x", ".hidden", None):
        with pytest.raises(ValueError, match="bad profile name"):
            paths.output_dir(bad)


@pytest.mark.slow  # a fresh interpreter per folder
@pytest.mark.parametrize("cwd", ["notebooks", "tests", None])
def test_the_default_does_not_depend_on_the_working_directory(cwd, tmp_path):
    """A notebook opened in JupyterLab from notebooks/ resolves out_dir=None as `make reproduce` does."""
    where = REPO / cwd if cwd else tmp_path
    code = "from typhoon.paths import resolve_out_dir; print(resolve_out_dir(None, 'cpu'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=where, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(REPO / "outputs" / "cpu")


def test_redact_makes_this_machines_paths_relative(monkeypatch, tmp_path):
    out = tmp_path / "out"
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: Path("/root")))
    monkeypatch.setenv("TYPHOON_GLUE_DIR", str(tmp_path / "glue"))
    site = next(p for p in sys.path if p.endswith("site-packages"))
    text = (f"wrote {out}/runs/mrpc/x and {out}; code in {REPO}/typhoon/grid.py; {site}/tqdm/auto.py; "
            f"/root/.cache/hf but /rootfs/data stays; data {tmp_path}/glue/MRPC; out_dir = \"{out}\"")
    shown = paths.redact(text, out)
    assert shown == ("wrote runs/mrpc/x and .; code in typhoon/grid.py; <site-packages>/tqdm/auto.py; "
                     "~/.cache/hf but /rootfs/data stays; data $TYPHOON_GLUE_DIR/MRPC; out_dir = \".\"")
    assert paths.shown(out / "stats" / "summary.csv", out) == "stats/summary.csv"
    assert paths.shown(REPO / "results" / "cpu") == "results/cpu"


def test_redact_knows_a_site_packages_reached_through_a_symlink(monkeypatch, tmp_path):
    """A venv linked from elsewhere (``.venv -> /shared/venv``) appears in tracebacks under either spelling."""
    real = tmp_path / "shared" / "lib" / "site-packages"
    real.mkdir(parents=True)
    (tmp_path / "linked").symlink_to(tmp_path / "shared", target_is_directory=True)
    linked = tmp_path / "linked" / "lib" / "site-packages"
    monkeypatch.setattr(sys, "path", [str(linked), *sys.path])
    assert paths.redact(f"{linked}/tqdm/auto.py and {real}/torch/nn.py") == \
        "<site-packages>/tqdm/auto.py and <site-packages>/torch/nn.py"


def test_the_paths_a_user_gives_in_the_environment_are_made_absolute_from_the_working_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/someone")
    environ = {"TYPHOON_PROFILES": f"mine.toml{os.pathsep}{os.pathsep}../theirs.toml{os.pathsep}/abs/x.toml",
               "TYPHOON_GLUE_DIR": "~/glue", "TYPHOON_NOTEBOOKS": "", "TYPHOON_CACHE_DIR": "cache/./here",
               "PYTHONPATH": "relative/stays"}
    paths.absolute_path_variables(environ)
    assert environ == {
        "TYPHOON_PROFILES": os.pathsep.join([f"{tmp_path}/mine.toml", f"{tmp_path.parent}/theirs.toml", "/abs/x.toml"]),
        "TYPHOON_GLUE_DIR": "/home/someone/glue", "TYPHOON_NOTEBOOKS": "", "TYPHOON_CACHE_DIR": f"{tmp_path}/cache/here",
        "PYTHONPATH": "relative/stays"}
