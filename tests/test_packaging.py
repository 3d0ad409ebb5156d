"""Packaging a stranger meets: the build backend, a non-editable install, Windows, the torch step, CI.

The locks and the three installers are checked in test_lock.py, the Docker build in test_docker.py.
"""

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from conftest import REPO
from packaging.requirements import Requirement

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_build_backend_admits_the_spdx_license_string():
    """`license = "MIT"` (PEP 639) is refused by setuptools before 77."""
    assert isinstance(PYPROJECT["project"]["license"], str)
    (setuptools,) = [Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    assert not setuptools.specifier.contains("76.9") and setuptools.specifier.contains("77.0")


@pytest.mark.slow  # pip builds and installs the wheel
def test_wheel_carries_the_bundled_data_and_the_metric(tmp_path):
    """A non-editable install (a wheel) finds the bundled GLUE data and the evaluate module inside itself."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (source / name).write_bytes((REPO / name).read_bytes())
    shutil.copytree(REPO / "typhoon", source / "typhoon", ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = (tmp_path / "dist").glob("typhoon-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for name in ("glue_data/SOURCES.md", "glue_data/MRPC/train.tsv", "glue_data/MRPC/SHA256SUMS",
                     "glue_data/MRPC/source/msr_paraphrase_train.txt", "glue_data/CoLA/dev.tsv",
                     "profiles.toml"):
            assert zf.read(f"typhoon/{name}") == (REPO / "typhoon" / name).read_bytes(), name
    assert not [n for n in names if n.startswith("typhoon/glue_data/") and n.split("/")[2] not in
                ("SOURCES.md", "CoLA", "MRPC")]
    # installed into a folder of its own, it loads the data and scores through the metric from any directory
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=600)
    code = ("import typhoon, typhoon.data.glue_files as d, typhoon.data.metrics as m; "
            "print(typhoon.__file__, d.locate_glue('mrpc').folder, len(d.load_glue('mrpc')['validation']), "
            "m.glue_metrics('mrpc', [1, 0, 1], [1, 1, 1])['f1'])")
    env = {k: v for k, v in os.environ.items() if k != "TYPHOON_GLUE_DIR"} | {"PYTHONPATH": str(target)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    module, folder, dev_size, f1 = proc.stdout.split()
    assert module.startswith(str(target)) and folder == str(target / "typhoon" / "glue_data" / "MRPC")
    assert (int(dev_size), float(f1)) == (408, 0.8)


@pytest.mark.slow  # a fresh interpreter that imports the whole package
def test_importable_without_fcntl():
    """Windows has no fcntl: the package (its locks included) must not need it."""
    code = ("import sys; sys.modules['fcntl'] = None\n"  # `import fcntl` now raises ImportError
            "import tempfile, pathlib\n"
            "import typhoon.cli, typhoon.data.glue_files, typhoon.data.metrics, typhoon.records.locks as r\n"
            "with tempfile.TemporaryDirectory() as d:\n"
            "    with r.exclusive_lock(pathlib.Path(d) / 'x.lock', 'test'):\n"
            "        print('locked')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == "locked", proc.stderr


def test_torch_step_refuses_an_unknown_variant():
    proc = subprocess.run(["bash", str(REPO / "scripts" / "install_torch.sh"), sys.executable, "2.13.0", "cuda"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "TORCH_VARIANT must be cpu, cuNNN" in proc.stderr


@pytest.mark.parametrize("name", ["Makefile", ".ci/run"])
def test_nothing_needs_a_folder_beside_the_repository(name):
    text = (REPO / name).read_text(encoding="utf-8")
    assert "../shared" not in text and "shared/data" not in text
    assert "TYPHOON_GLUE_DIR=" not in text.replace("${TYPHOON_GLUE_DIR:-", "")


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "make test" in readme and "make reproduce" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
