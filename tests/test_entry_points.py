"""Every entry point under ``benchmarks/`` and ``scripts/`` runs in the suite, so that none rots unseen: a function
moved, a signature changed or an option renamed in the package fails a test here, not on the day someone needs
the script's figure.

- **Fast tier:** each answers ``--help``. A Python script runs in the test's own process, as ``__main__`` with
  ``sys.argv`` set (what ``python SCRIPT --help`` does, without starting an interpreter: its imports, its
  parser and its ``__main__`` block run); a shell script is parsed by ``bash -n`` and prints its header with
  ``--help`` (bash alone, no Python).
- **Slow tier:** each makes a tiny real run, from :data:`TINY_RUNS`: arguments that shrink its work to seconds
  (a cell or two of a few dozen examples, one repeat, a step), the exit status it must give and a pattern its
  output must show. A Python script runs in the test's process the same way (its worker processes and the
  commands it times are real processes); a shell script in bash. A run that costs minutes and has a test of its
  own names that test instead (:class:`Elsewhere`), and a shell script that cannot run offline without root
  says why (:class:`NotHere`).

The entry points are listed from git (``git ls-files benchmarks scripts``; the folders where this is no git
checkout): a script added later is picked up by itself, and until it has its row in :data:`TINY_RUNS` the
test of the table fails naming it. :data:`MODULES` are the files there that are imported by a script rather
than run. What each run costs: docs/testing.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmarks", "scripts")


@dataclass(frozen=True)
class Tiny:
    """A tiny real run: ``args`` (``{tmp}``: a fresh temp folder; ``{repo}``: the checkout), the exit ``status`` it
    must give and a regular expression its output (stdout and stderr together) must match."""

    args: tuple[str, ...]
    prints: str
    status: int = 0


@dataclass(frozen=True)
class Elsewhere:
    """Run for real by ``test`` (``tests/FILE.py::NAME``), which costs minutes: not run twice."""

    test: str


@dataclass(frozen=True)
class NotHere:
    """A shell script that cannot run offline without root (a Python script always can, in a tiny form)."""

    why: str


# Files there that other scripts import, not entry points: each must have no __main__ block and be imported by one.
MODULES = {
    "benchmarks/common.py": "the set-up several benchmarks share (a backbone and MRPC examples)",
    "scripts/one_node_slurm.py": "the one-node SLURM that scripts/slurm_check.py starts",
    "scripts/device_weights.py": "the weights in parts and what comes back, which scripts/device_bundle.py uses",
}

SMOKE = "{repo}/results/smoke"  # a committed reference run: records, results.csv, MANIFEST.json
SMOKE_RECORD = f"{SMOKE}/runs/mrpc/tiny-random/random/seed0"
TINY_DATA = ("--set", "max_train_examples=32", "--set", "max_eval_examples=16")
TINY = ("--backbone", "tiny-random")  # 2 layers of width 64 over the real uncased vocabulary: a step in milliseconds

TINY_RUNS: dict[str, Tiny | tuple[Tiny, ...] | Elsewhere | NotHere] = {
    "benchmarks/analysis_shapes.py": Tiny((), r"parameters"),
    "benchmarks/bench_bad_input.py": Tiny(("--only", "unknown task"), r"^\| unknown task \| 2 \|"),
    "benchmarks/bench_calibration.py": Tiny(("--repeats", "1"), r"calibrate"),
    "benchmarks/bench_cell_phases.py": Tiny(("--variants", "fp32", "--examples", "32", "--rounds", "1", *TINY),
                                            r"fp32 +mlm"),
    "benchmarks/bench_cli_startup.py": Tiny(("--repeats", "1"), r"profiles"),
    "benchmarks/bench_decisive_cap.py": Tiny(("--looks", "3", "6", "--studies", "200"), r"looks 3 6"),
    "benchmarks/bench_ddp_share.py": Tiny(("--steps", "1", "--batch-size", "4", *TINY), r"all-reduce of the Typhoon sums"),
    "benchmarks/bench_dropout.py": Tiny(("--threads", "1", "--repeats", "1", "--examples", "32", *TINY),
                                        r"speed-up: +\d"),
    "benchmarks/bench_estimate.py": Tiny(("--cells", "1", "--workers", "1", "--out", "{tmp}/out", *TINY_DATA),
                                         r"grid: estimate \d+ s, actual"),
    "benchmarks/bench_hf_trainer.py": Tiny(("--backbone", "tiny-random", "--steps", "1", "--repeats", "1",
                                            "--batch-size", "4", "--threads", "1"), r"ratio"),
    "benchmarks/kl_curve_gpu_plan.py": Tiny(("--steps-per-s", "600"), r"600 +11\.0 m"),
    "benchmarks/bench_hf_import.py": Tiny(("--arms", "core", "--repeats", "1"), r"core install +[\d.]+ .* none"),
    "benchmarks/bench_install.sh": NotHere("downloads every package of the lock from the index, from empty caches"),
    "benchmarks/bench_kernel_imports.py": Tiny(("--repeats", "1", "--notebooks", "20_statistics"), r"20_statistics"),
    "benchmarks/bench_longest_first.py": Tiny(("--cells", "2", "--workers", "1", "--repeats", "1", *TINY_DATA),
                                              r"ratio \d"),
    "benchmarks/bench_masking.py": Tiny(("--batches", "1", "--repeats", "1", "--threads", "1"), r"whole_word"),
    "benchmarks/bench_matmul_peak.py": Tiny(("--rounds", "1", "--threads", "1", "--dtypes", "fp32"), r"^ *fp32 +1 +\d"),
    "benchmarks/bench_mlm_head.py": Tiny(("--threads", "1", "--repeats", "1", "--batches", "1", *TINY),
                                         r"head speed-up"),
    "benchmarks/bench_precision.py": Tiny(("--examples", "32", "--threads", "1", *TINY), r"bf16: .* tokens/s"),
    "benchmarks/bench_resume_cell.py": Tiny(("--out", "{tmp}/resume", *TINY, "--examples", "32"), r"resum"),
    "benchmarks/bench_resume_masks.py": Tiny(("--steps", "2", "--saved-at", "1", "--workers", "0", "--only",
                                             "TyphoonTrainer, typhoon"), r"TyphoonTrainer, typhoon +1 of 1"),
    "benchmarks/bench_saliency.py": (
        Tiny(("--threads", "1", "--repeats", "1", "--steps", "1", "--batch-size", "4", "--length", "32", "--no-memory"),
             r"ratio typhoon/random"),
        Tiny(("--child", "hook", "--threads", "1", "--batch-size", "4", "--length", "32"), r'"peak_increase_mib"')),  # the memory measured in a child
    "benchmarks/bench_seed_stats.py": Tiny(("--repeats", "1", "--coverage-reps", "20", "--aso-iterations", "20"),
                                          r"coverage of nominal 95% CIs, n = 10"),
    "benchmarks/bench_sequential.py": Tiny(("--studies", "200"), r"sequential E\[seeds\]"),
    "benchmarks/bench_shape_warmup.py": Tiny(("--threads", "1", "--widths", "40", *TINY), r"bf16: L=40"),
    "benchmarks/bench_smoke.py": Tiny(("--cells", "1", "--workers", "1", "--no-analysis", "--out", "{tmp}/out",
                                       *TINY_DATA), r"fixed cost per cell .* over 1 cell"),
    "benchmarks/bench_softmax_tau.py": Tiny(("--tasks", "mrpc", "--examples", "32", "--taus", "0.5", *TINY),
                                            r"recalibrated"),
    "benchmarks/bench_step_profile.py": Tiny(("--steps", "1", "--width", "40", *TINY), r"ft +bf16: .*matrix products"),
    "benchmarks/bench_stop_latency.py": Tiny(("--repeats", "1", "--commands", "run", "--out", "{tmp}/stop"),
                                           r"run SIGTERM: exit \d+ after [\d.]+ s, 0 processes left"),
    "benchmarks/bench_task_saliency.py": Tiny(("--steps", "1", *TINY), r"ratio \d"),
    "benchmarks/bench_test_time.py": Tiny(("{tmp}/durations.log",), r"0\.5 +66\.7 % +tests/test_a\.py"),
    "benchmarks/bench_torch_step.py": Tiny(("--repeats", "1", "--index-url", "http://127.0.0.1:9/simple"),
                                           r"unreachable"),
    "benchmarks/cell_record_summary.py": Tiny((SMOKE_RECORD,), r"GFLOP"),
    "benchmarks/check_training_path.py": Tiny(  # the one value SET_UP changed in a copy of the records is found
        (SMOKE, "{tmp}/new"), r"random/seed0 \| .* \| NO \| metrics\.final\.dev_f1 \|(.*\n)*6 of 7 cells identical",
        status=1),
    "benchmarks/gpu_step_trial.py": Tiny(("--device", "cpu", "--backbone", "tiny-random", "--warmup", "1", "--steps",
                                          "1", "--examples", "64", "--variants", "random:host,typhoon:device"),
                                         r"typhoon:device:eager: warm-up"),
    "benchmarks/gpu_targets.py": Tiny((SMOKE,), r"wall"),
    "benchmarks/stage_faces.py": Tiny((), r"face"),
    "benchmarks/suite_as_avx2.sh": NotHere("needs root: a mount namespace with /proc/cpuinfo bind-mounted"),
    "benchmarks/typhoon_update_cost.py": Tiny(("--steps", "2", "--rows", "4", "--length", "16"), r"ms"),
    "scripts/backbone_card_losses.py": Tiny(("--draws", "1", "--examples", "8"), r"1234 +cola"),
    "scripts/container_check.sh": NotHere("builds the Docker image: a container engine and the package index"),
    "scripts/core_site.py": Tiny(("{tmp}/core",), r"^torch==\S+$"),
    "scripts/device_bundle.py": Tiny(("size", "--max-mib", "1000000"), r"to copy: .* MiB"),
    "scripts/fresh_clone_check.sh": NotHere("runs `make install` and the whole suite in a fresh clone: CI itself"),
    "scripts/gpu_check.sh": NotHere("needs a CUDA GPU and wheels brought along (docs/testing.md)"),
    "scripts/gpu_curve.sh": Elsewhere("tests/test_gpu_curve_rehearsal.py::"
                                      "test_the_prepared_curves_run_from_an_empty_folder_offline_and_land_where_the_table_reads_them"),
    "scripts/install_torch.sh": Elsewhere(
        "tests/test_docker.py::test_install_torch_says_why_the_local_wheel_failed_then_falls_back"),
    "scripts/lockfiles.py": Tiny(("requirement", "uv"), r"^uv==\S+ .*--hash=sha256:"),
    "scripts/resolve_record_configs.py": Tiny(("{tmp}/smoke",), r"smoke: \d+ config.json rewritten"),
    "scripts/slurm_check.py": Elsewhere("tests/test_slurm.py::test_smoke_grid_survives_slurm_jobs_ended_by_their_walltime"),
    "scripts/train_mlm_backbone.py": Tiny(("--work", "{tmp}/mlm", "--steps", "2", "--batch-size", "2", "--warmup",
                                           "1", "--eval-every", "2", "--eval-sequences", "2"), r'"step": 2'),
}


def tiny_runs() -> list[tuple[str, int]]:
    """(entry point, the index of its tiny run) for every :class:`Tiny` row."""
    found = []
    for path, run in TINY_RUNS.items():
        runs = run if isinstance(run, tuple) else (run,)
        found += [(path, i) for i, each in enumerate(runs) if isinstance(each, Tiny)]
    return found


def tracked_files() -> list[str]:
    """Every file under benchmarks/ and scripts/: git's list, or the folders' where this is no git checkout."""
    try:
        listed = subprocess.run(["git", "ls-files", *FOLDERS], cwd=REPO, capture_output=True, text=True, check=True)
        return sorted(listed.stdout.split())
    except (OSError, subprocess.CalledProcessError):
        return sorted(p.relative_to(REPO).as_posix() for f in FOLDERS for p in (REPO / f).rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)


ENTRY_POINTS = [path for path in tracked_files() if path not in MODULES]
PYTHON = [path for path in ENTRY_POINTS if path.endswith(".py")]
SHELL = [path for path in ENTRY_POINTS if path.endswith(".sh")]


@contextlib.contextmanager
def as_main(script: Path, argv: list[str]):
    """``script`` about to run as ``python script argv...`` would, in this process: sys.argv set, its folder first
    on sys.path; afterwards the environment, sys.path, the warning filters and the working folder as they were,
    and the modules imported from benchmarks/ or scripts/ forgotten (their names, such as ``common``, are
    generic)."""
    saved_argv, saved_path, saved_environ, cwd = sys.argv[:], sys.path[:], dict(os.environ), os.getcwd()
    saved_modules = set(sys.modules)
    sys.argv = [str(script), *argv]
    sys.path.insert(0, str(script.parent))
    try:
        with warnings.catch_warnings():
            yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.environ.clear()
        os.environ.update(saved_environ)
        os.chdir(cwd)
        folders = tuple(str(REPO / f) for f in FOLDERS)
        for name in set(sys.modules) - saved_modules:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(folders):
                del sys.modules[name]


def run_script(script: Path, argv: list[str]) -> int:
    """Run a Python script as ``__main__`` in this process; its exit status (a message given to sys.exit is
    printed to stderr, as the interpreter would)."""
    with as_main(script, argv):
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                return stop.code or 0
            print(stop.code, file=sys.stderr)
            return 1
    return 0


def test_every_entry_point_has_a_tiny_run_and_the_table_names_only_entry_points():
    missing = [path for path in ENTRY_POINTS if path not in TINY_RUNS]
    assert not missing, (f"no tiny run for {missing}: add each to TINY_RUNS in tests/test_entry_points.py "
                         "(arguments that run it in seconds, and what it must print)")
    stale = sorted(set(TINY_RUNS) - set(ENTRY_POINTS))
    assert not stale, f"TINY_RUNS names files that are no entry point under {FOLDERS}: {stale}"
    not_shell = [path for path, run in TINY_RUNS.items() if isinstance(run, NotHere) and not path.endswith(".sh")]
    assert not not_shell, f"a Python script makes a tiny run here, whatever it needs elsewhere: {not_shell}"
    assert len(ENTRY_POINTS) >= 45  # 35 benchmarks and 10 scripts when this was written; fewer means a lost list


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_there_is_imported_by_a_script_and_runs_nothing_itself(module):
    name = Path(module).stem
    assert "__main__" not in (REPO / module).read_text(encoding="utf-8"), f"{module} runs: give it a row in TINY_RUNS"
    importers = [path for path in ENTRY_POINTS if path.endswith(".py") and re.search(
        rf"^\s*(from {name} import|import {name}\b)", (REPO / path).read_text(encoding="utf-8"), re.M)]
    assert importers, f"no entry point imports {module}: it runs in no test"


@pytest.mark.parametrize("path", [path for path, run in TINY_RUNS.items() if isinstance(run, Elsewhere)])
def test_a_run_made_elsewhere_is_made_by_the_test_named(path):
    file, _, name = TINY_RUNS[path].test.partition("::")
    source = (REPO / file).read_text(encoding="utf-8")
    body = re.search(rf"^def {name}\(.*?(?=^\S)", source + "\n_", re.M | re.S)
    assert body, f"{file} has no test {name}"
    assert Path(path).name in body.group(0), f"{file}::{name} does not run {path}"


@pytest.mark.parametrize("path", PYTHON)
def test_a_python_entry_point_answers_help(path, capfd):
    assert run_script(REPO / path, ["--help"]) == 0
    out = capfd.readouterr().out
    assert out.startswith(f"usage: {Path(path).name}"), out[:300]


@pytest.mark.parametrize("path", SHELL)
def test_a_shell_entry_point_parses_and_answers_help(path):
    assert subprocess.run(["bash", "-n", str(REPO / path)], capture_output=True, text=True).returncode == 0
    shown = subprocess.run(["bash", str(REPO / path), "--help"], capture_output=True, text=True, timeout=10)
    assert shown.returncode == 0, shown.stderr
    assert path in shown.stdout, shown.stdout[:300]  # the header shows how to call it


def durations_log(path: Path) -> None:
    """A pytest log with --durations=0's lines, as bench_test_time.py reads them."""
    path.write_text("0.50s call     tests/test_a.py::test_one\n0.25s setup    tests/test_b.py::test_two\n"
                    "=== 2 passed in 1.00s ===\n", encoding="utf-8")


def prose_cache(work: Path) -> None:
    """What train_mlm_backbone.py keeps of the Debian prose corpus it packs (whose packages a test machine lacks):
    8 train and 4 held-out rows of 128 ids, [CLS] first and [SEP] last, as its ``pack`` writes them."""
    ids = np.random.default_rng(0).integers(1996, 29612, size=(12, 128), dtype=np.int32)  # wordpieces, no specials
    ids[:, 0], ids[:, -1] = 101, 102
    work.mkdir()
    np.savez(work / "data.npz", train=ids[:8], held_out=ids[8:])
    (work / "corpus.json").write_text(json.dumps({"none": {"paragraphs": 0}}), encoding="utf-8")


def smoke_copy_with_one_value_changed(new: Path) -> None:
    """results/smoke's records, one of them with its final dev F1 changed in the last digits."""
    shutil.copytree(REPO / "results/smoke/runs", new / "runs")
    metrics_file = new / "runs/mrpc/tiny-random/random/seed0/metrics.json"
    metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    metrics["final"]["dev_f1"] += 1e-9
    metrics_file.write_text(json.dumps(metrics), encoding="utf-8")


SET_UP = {  # what a tiny run reads, made in its temp folder first
    "benchmarks/check_training_path.py": lambda tmp: smoke_copy_with_one_value_changed(tmp / "new"),
    "benchmarks/bench_test_time.py": lambda tmp: durations_log(tmp / "durations.log"),
    "scripts/resolve_record_configs.py": lambda tmp: shutil.copytree(REPO / "results/smoke/runs", tmp / "smoke" / "runs"),
    "scripts/train_mlm_backbone.py": lambda tmp: prose_cache(tmp / "mlm"),
}


@pytest.mark.slow
@pytest.mark.parametrize("path, index", tiny_runs(), ids=[f"{p}-{i}" for p, i in tiny_runs()])
def test_an_entry_point_makes_a_tiny_real_run(path, index, tmp_path, capfd):
    run = TINY_RUNS[path][index] if isinstance(TINY_RUNS[path], tuple) else TINY_RUNS[path]
    if path in SET_UP:
        SET_UP[path](tmp_path)
    args = [arg.format(tmp=tmp_path, repo=REPO) for arg in run.args]
    if path.endswith(".sh"):
        done = subprocess.run(["bash", str(REPO / path), *args], capture_output=True, text=True, timeout=300)
        status, out = done.returncode, done.stdout + done.stderr
    else:
        status = run_script(REPO / path, args)
        captured = capfd.readouterr()
        out = captured.out + captured.err
    assert status == run.status, f"{path} exited {status}:\n{out[-3000:]}"
    assert re.search(run.prints, out, re.M), f"{path} did not print {run.prints!r}:\n{out[-3000:]}"
