"""The CLI's quick commands (``--help``, ``profiles``) answer without importing the heavy libraries.

Each command runs in a fresh interpreter, and a small wrapper prints which modules it had imported when
the command returned: torch, transformers, pandas, papermill, datasets and evaluate must not be among them (each
costs from half a second to several seconds of start-up). No timing is asserted; the times are measured
by benchmarks/bench_cli_startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "pandas", "papermill", "datasets", "evaluate")

# Run the CLI as `python -m typhoon ARGS` does, then report the imported top-level modules on stdout's last line.
WRAPPER = """
import json, sys
from typhoon.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit_:  # argparse exits after --help
    code = exit_.code
print(json.dumps({"code": code, "modules": sorted({name.split(".")[0] for name in sys.modules})}))
"""


def imported_by(args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["reproduce", "--help"], ["profiles"],
                                  ["data", "--help"], ["data", "fetch", "--help"]])
@pytest.mark.slow  # a fresh interpreter per command
def test_quick_commands_import_no_heavy_library(args):
    result = imported_by(args)
    assert result["code"] in (0, None)
    heavy = sorted(set(HEAVY) & set(result["modules"]))
    assert not heavy, f"`typhoon {' '.join(args)}` imported {heavy}"


@pytest.mark.slow  # a fresh interpreter that imports torch
def test_the_wrapper_sees_a_heavy_import():
    """The check can fail: code that does import torch (building a masking strategy) is reported."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = ("import json, sys; from typhoon.masking import get_strategy; get_strategy('random'); "
            "print(json.dumps(sorted({n.split('.')[0] for n in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "torch" in json.loads(done.stdout.strip().splitlines()[-1])


def test_run_help_lists_every_strategy_parameter():
    """The help text comes from the torch-free declarations; the strategies the registry builds take exactly
    those parameters, with those defaults."""
    from typhoon.masking import get_strategy
    from typhoon.masking.params import STRATEGY_PARAMS, strategy_help

    text = strategy_help()
    for name, params in STRATEGY_PARAMS.items():
        assert get_strategy(name).params == {param.name: param.default for param in params}
        for param in params:
            assert f"{param.name} ({param.type.__name__}, default {param.default!r})" in text


@pytest.mark.slow  # a fresh interpreter that imports the training stack
def test_the_training_stack_imports_evaluate_only_to_score():
    """`evaluate` imports transformers' pipelines (0.7 s more CPU): the training stack imports it only when a
    run is scored (typhoon/data/metrics.py), so a worker that has not finished a cell and the command line do
    not pay for it. The check fails if an import at module level brings it back."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = ("import json, sys; from typhoon.training import run; from typhoon.data.metrics import glue_metrics; "
            "before = 'evaluate' in sys.modules; glue_metrics('cola', [1, 0], [1, 1]); "
            "print(json.dumps({'run': 'typhoon.training.run' in sys.modules, 'before': before, "
            "'after': 'evaluate' in sys.modules}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded == {"run": True, "before": False, "after": True}
