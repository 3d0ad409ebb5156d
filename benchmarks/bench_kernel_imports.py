"""CPU time of each notebook's imports, each in a fresh interpreter: what every notebook kernel pays before
its first line of work (the grid starts one kernel per cell, the analysis one per notebook).

    python benchmarks/bench_kernel_imports.py [--repeats 5] [--repo PATH] [--notebooks 10_run 20_statistics]

The import statements are read from the notebooks' code cells (every line that starts with ``import`` or
``from``), so the measurement follows the notebooks as they change. ``--repo`` times another checkout (e.g.
one at the commit before an import was cut). Prints the median and the best CPU seconds (user + system) per
notebook, and whether seaborn, scipy and pingouin were imported.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path

WATCHED = ("seaborn", "scipy", "pingouin", "torch", "transformers", "evaluate")


def notebook_imports(notebook: Path) -> str:
    """The import lines of ``notebook``'s code cells, in order, as one script."""
    lines = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            lines += [line for line in "".join(cell["source"]).splitlines() if line.startswith(("import ", "from "))]
    return "\n".join(lines)


def cpu_seconds(repo: Path, code: str) -> tuple[float, list[str]]:
    """CPU seconds of a fresh interpreter running ``code`` with ``repo`` first on its path, and which of
    :data:`WATCHED` it imported."""
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{n.split('.')[0] for n in sys.modules}} & {set(WATCHED)!r})))"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", script], cwd=repo, env={"PYTHONPATH": str(repo), "PATH": ""},
                          capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--notebooks", nargs="+", default=["10_run", "20_statistics", "30_budget_spread"])
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    print(f"repo: {repo}; {args.repeats} fresh interpreters per notebook; CPU s (user + system)")
    for name in args.notebooks:
        code = notebook_imports(repo / "notebooks" / f"{name}.ipynb")
        runs = [cpu_seconds(repo, code) for _ in range(args.repeats)]
        times = [t for t, _ in runs]
        print(f"{name:18s} median {statistics.median(times):5.2f}  best {min(times):5.2f}  imports {', '.join(runs[0][1])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
