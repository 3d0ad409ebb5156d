"""The second addendum's GPU command rehearsed on the CPU (issue 68): the curves' bundle prepared in a clone, each
copy under the 64 MiB limit, only what travels put in an empty folder, ``scripts/gpu_curve.sh`` run there with no
network (a network namespace of its own where the machine allows one) on a few examples a run, and what comes back
landed where ``kl-original table`` reads it -- which then refuses the rehearsal's runs as not the registered ones."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow
LIMIT_MIB = 64


def git(cwd, *args) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def clone_without_results(dest: Path) -> Path:
    """A clone of the repository as it stands (uncommitted changes too), without results/ on disk."""
    git(dest.parent, "clone", "-q", "--local", "--no-checkout", str(REPO), dest.name)
    git(dest, "sparse-checkout", "set", "--no-cone", "/*", "!/results/")
    git(dest, "checkout", "-q", "HEAD")
    changed = git(REPO, "ls-files", "-z", "--modified", "--others", "--exclude-standard").split("\0")
    for name in filter(None, changed):
        source = REPO / name
        if name.startswith("results/") or not source.is_file():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / name)
    return dest


def what_travels(tree: Path, carry: list[str], dest: Path) -> Path:
    """Into an empty folder, only what a copy to the GPU machine holds: the tracked and untracked-not-ignored files
    on disk, and the carried paths."""
    names = git(tree, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in filter(None, names):
        if (tree / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(tree / name, dest / name)
    for path in carry:
        shutil.copytree(tree / path, dest / path, dirs_exist_ok=True)
    return dest


def no_network() -> list[str]:
    """A network namespace of its own where the machine allows one (root, or user namespaces)."""
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        if shutil.which("unshare") and subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    return []


def test_the_prepared_curves_run_from_an_empty_folder_offline_and_land_where_the_table_reads_them(tmp_path):
    tree = clone_without_results(tmp_path / "tree")
    prepared = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, 'scripts'); import device_bundle as d; "
         "from pathlib import Path; d.prepare_curve(Path('.'), download=False); "
         f"d.check_sizes(d.curve_copies(), {LIMIT_MIB}, Path('.'))"],
        cwd=tree, capture_output=True, text=True, timeout=300)
    assert prepared.returncode == 0, prepared.stderr
    sizes = [float(line.split(": ")[1].split(" MiB")[0]) for line in prepared.stdout.splitlines() if "MiB" in line]
    assert len(sizes) == 2 and all(size <= LIMIT_MIB for size in sizes), prepared.stdout
    assert not (tree / "typhoon" / "models" / "weights").exists()  # left behind: it travels in the parts

    there = tmp_path / "there"  # the GPU machine: an empty folder, the copies' contents put in one by one
    for carry in [[".device/part-1"], [".device/part-2", ".device/wheels", ".device/site"]]:
        what_travels(tree, [path for path in carry if (tree / path).exists()], there)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TYPHOON_", "PYTHONPATH"))}
    env.update(REHEARSE="8", DEVICE="cpu", SLOTS="1", PYTHON=sys.executable, WORK=str(tmp_path / "work"),
               CURVE_CAP_S="400")
    ran = subprocess.run([*no_network(), "bash", "scripts/gpu_curve.sh", str(tmp_path / "back")], cwd=there, env=env,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "the model prepared (weights digest" in ran.stdout  # joined without loss: minilm-l6-mlm as prepared
    back = sorted(path.name for path in (tmp_path / "back").iterdir())
    assert back[-1] == "curve_summary.txt" and all(name.startswith("curve.tar.xz.") for name in back[:-1])
    assert len(back) <= 8 and all((tmp_path / "back" / name).stat().st_size <= 16 * 2**20 for name in back)

    study = tmp_path / "study"
    study.mkdir()
    landed = subprocess.run([sys.executable, "scripts/device_bundle.py", "land", str(tmp_path / "back"), str(study)],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert landed.returncode == 0, landed.stderr
    from typhoon.studies import kl_original as kl
    from typhoon.studies.kl_original.design import CURVES

    for name in ("all_plus", "all_gpu"):
        for task in ("mrpc", "cola"):
            for seed in (0, 1, 2):
                run = study / CURVES[name].folder / task / f"seed{seed}"
                assert {p.name for p in run.iterdir()} >= {"epochs.csv", "trace.csv", "mlm_loss.csv", "run.json",
                                                           "epoch1"}, run
        curves = kl.read_curves(study, CURVES[name].folder)  # what kl-original table reads
        assert len(curves) == 6 and set(curves["epoch"]) == {1}
    table = subprocess.run([sys.executable, "-m", "typhoon", "kl-original", "table", "--out", str(study)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 2 and "not a run of the registered curve" in table.stderr
