"""How fast bad input is refused: each case runs ``python -m typhoon ...`` in a fresh interpreter.

    nice -n 5 python benchmarks/bench_bad_input.py [--repo PATH] [--only SUBSTRING]

``--repo`` times another checkout's ``typhoon`` (e.g. ``git archive`` of the commit before the checks
moved ahead of the imports). Prints one row per case: its name, the exit status, the first line of
stderr, the wall time and whether anything appeared in the case's scratch folder (a refused command
must write nothing). Issue 37 asks for every case to be refused, exit 2, in under 2 s. It prints the
load average and the time of a bare interpreter first: on a loaded machine that floor is a large part of
each case's time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (case, arguments[, environment]); {tmp} is a fresh empty scratch folder per case, {file} a file inside it,
# {repo} the checkout timed.
CASES = (
    ("unknown task", ["run", "--task", "mrcp", "--out", "{tmp}/out"]),
    ("unknown backbone", ["run", "--task", "mrpc", "--backbone", "minilm-l7", "--out", "{tmp}/out"]),
    ("unknown strategy", ["run", "--task", "mrpc", "--strategy", "typhon", "--out", "{tmp}/out"]),
    ("unknown profile (run)", ["run", "--task", "mrpc", "--profile", "gpu-huge", "--out", "{tmp}/out"]),
    ("unknown profile (reproduce)", ["reproduce", "--profile", "gpu-huge", "--out", "{tmp}/out"]),
    ("run --seed -1", ["run", "--task", "mrpc", "--seed", "-1", "--out", "{tmp}/out"]),
    ("reproduce --workers 0", ["reproduce", "--profile", "smoke", "--workers", "0", "--out", "{tmp}/out"]),
    ("run --out is a file", ["run", "--task", "mrpc", "--out", "{file}"]),
    ("reproduce --out is a file", ["reproduce", "--profile", "smoke", "--out", "{file}"]),
    ("run --out under a file", ["run", "--task", "mrpc", "--out", "{file}/sub/out"]),
    ("run --out read-only (/proc)", ["run", "--task", "mrpc", "--out", "/proc/typhoon-out"]),
    ("--set unknown field", ["run", "--task", "mrpc", "--set", "learning_rate=1e-4", "--out", "{tmp}/out"]),
    ("--set without '='", ["run", "--task", "mrpc", "--set", "p", "--out", "{tmp}/out"]),
    ("--set p=1.5", ["run", "--task", "mrpc", "--set", "p=1.5", "--out", "{tmp}/out"]),
    ("--set ft_epochs=0", ["run", "--task", "mrpc", "--set", "ft_epochs=0", "--out", "{tmp}/out"]),
    ("--set mlm_epochs=-1", ["run", "--task", "mrpc", "--set", "mlm_epochs=-1", "--out", "{tmp}/out"]),
    ("--set ft_epochs=two", ["run", "--task", "mrpc", "--set", "ft_epochs=two", "--out", "{tmp}/out"]),
    ("--set delta=2 (typhoon)", ["run", "--task", "mrpc", "--strategy", "typhoon", "--set", "delta=2",
                                 "--out", "{tmp}/out"]),
    ("--set precision=fp8", ["run", "--task", "mrpc", "--set", "precision=fp8", "--out", "{tmp}/out"]),
    ("reproduce --set batch_size=0", ["reproduce", "--profile", "smoke", "--set", "batch_size=0",
                                      "--out", "{tmp}/out"]),
    ("reproduce --set task=colaa", ["reproduce", "--profile", "smoke", "--set", "task=colaa", "--out", "{tmp}/out"]),
    ("kl-gap --cause weather", ["kl-gap", "--cause", "weather", "--out", "{tmp}/out"]),
    ("kl-gap --seeds -1", ["kl-gap", "--seeds", "-1", "--out", "{tmp}/out"]),
    ("kl-gap --out is a file", ["kl-gap", "--out", "{file}"]),
    ("results-readme missing folder", ["results-readme", "{tmp}/missing_folder"]),
    ("check-report missing", ["check-report", "{tmp}/missing"]),
    ("decisive-design --profile cpu", ["decisive-design", "--profile", "cpu"]),
    ("decisive-design unknown profile", ["decisive-design", "--profile", "gpu-huge"]),
    # issue 51: refused after 4.6 s, 20 s, 14.5 s, and a warning then 90 s of training
    ("--strategy os:path (not a strategy)", ["run", "--task", "mrpc", "--strategy", "os:path", "--out", "{tmp}/out"]),
    ("reproduce smoke into results/cpu", ["reproduce", "--profile", "smoke", "--out", "{repo}/results/cpu"]),
    ("--backbone a folder without a checkpoint", ["run", "--task", "mrpc", "--backbone", "{tmp}", "--out", "{tmp}/out"]),
    ("TYPHOON_GLUE_DIR=/nonexistent", ["run", "--task", "mrpc", "--out", "{tmp}/out"],
     {"TYPHOON_GLUE_DIR": "/nonexistent"}),
    # issue 70: a task and a backbone name of one's own, declared in a profiles file (DECLARED below)
    ("a declared task's metric 'auc'", ["run", "--task", "reviews", "--out", "{tmp}/out"],
     {"TYPHOON_PROFILES": "{tmp}/bad_task.toml"}),
    ("a declared task's column not in its file", ["run", "--task", "reviews", "--out", "{tmp}/out"],
     {"TYPHOON_PROFILES": "{tmp}/bad_column.toml"}),
    ("a declared backbone name's source nowhere", ["run", "--task", "mrpc", "--backbone", "mine", "--out", "{tmp}/out"],
     {"TYPHOON_PROFILES": "{tmp}/bad_backbone.toml"}),
)
# the scratch files the declaration cases name: a task's file and three profiles files, each with one bad field
TASK_TABLE = '[tasks.reviews]\ntrain = "reviews.csv"\ndev = "reviews.csv"\nlabel_column = "verdict"\nlabels = ["bad", "good"]\n'
DECLARED = {
    "reviews.csv": "review,verdict\nworks exactly as promised,good\nit broke after two days,bad\n",
    "bad_task.toml": TASK_TABLE + 'text_columns = ["review"]\nmetric = "auc"\n',
    "bad_column.toml": TASK_TABLE + 'text_columns = ["text"]\nmetric = "accuracy"\n',
    "bad_backbone.toml": '[backbones.mine]\nsource = "./checkpoints/gone"\n',
}


def run_case(repo: Path, args: list[str], extra_env: dict | None = None) -> tuple[int, str, float, bool]:
    """(exit status, first line of stderr, seconds, whether anything new appeared in the scratch folder)."""
    with tempfile.TemporaryDirectory(prefix="typhoon-bad-input-") as tmp:
        scratch = Path(tmp)
        (scratch / "a_file").write_text("in the way\n")
        for name, text in DECLARED.items():
            (scratch / name).write_text(text)
        before = set(scratch.rglob("*"))
        argv = [a.format(tmp=tmp, file=scratch / "a_file", repo=repo) for a in args]
        env = {**os.environ, "PYTHONPATH": str(repo), **{k: v.format(tmp=tmp) for k, v in (extra_env or {}).items()}}
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "typhoon", *argv], env=env, cwd=repo, capture_output=True,
                              text=True, timeout=300)
        seconds = time.perf_counter() - start
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
        return done.returncode, first.replace(tmp, "<tmp>"), seconds, set(scratch.rglob("*")) != before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--only", help="run only the cases whose name contains this")
    args = parser.parse_args()
    print(f"typhoon from {args.repo}, python {sys.executable}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"the floor on this machine now: `python -c pass` takes {time.perf_counter() - start:.2f} s")
    print("| case | exit | stderr (first error line) | seconds | wrote |\n|---|---|---|---|---|")
    slow = 0
    for name, argv, *extra_env in CASES:
        if args.only and args.only not in name:
            continue
        code, first, seconds, wrote = run_case(args.repo, argv, *extra_env)
        slow += seconds >= 2 or code != 2 or wrote
        print(f"| {name} | {code} | {first[:110].replace('|', '/')} | {seconds:.2f} | {'yes' if wrote else 'no'} |",
              flush=True)
    print(f"{slow} case(s) not refused with exit 2 within 2 s without writing anything")


if __name__ == "__main__":
    main()
