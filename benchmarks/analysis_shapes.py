"""The shape of typhoon/analysis's functions: lines, parameters and, for the tables, columns (issue 51,
Build item 4: one question per function, a tidy frame out).

    python benchmarks/analysis_shapes.py [--all] [--package typhoon]

Lines and parameters come from the source (an AST walk of ``<package>/analysis``: a function's lines run
from its ``def`` to its last line, docstring included; every parameter counts, ``self``, ``*args`` and
``**kwargs`` too). Columns come from calling the function on a committed reference run (``results/cpu``,
``results/schedules``, ``results/bottleneck``): only for the table functions listed in :data:`CALLS`, each
looked up by name, so a function that does not exist in the tree measured is left out rather than failing.
Without ``--all`` only the long ones are listed (over 60 lines or over 8 parameters) and those with
columns. ``--package`` points at another tree's package (an older checkout), so the figures before a
change and after it come from this one script: ``PYTHONPATH=<tree> python benchmarks/analysis_shapes.py
--package <tree>/typhoon``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
LONG_LINES, MANY_PARAMETERS = 60, 8
FAST = {"aso_iterations": 50, "bootstrap_resamples": 199}  # the columns do not depend on these


def _results(name: str, tidy: bool = False) -> pd.DataFrame:
    from typhoon.analysis import run_summary

    return run_summary.load_results(REPO / "results" / name / "results.csv", tidy=tidy)


def _pairs() -> pd.DataFrame:
    return importlib.import_module("typhoon.analysis.pairwise").paired_values(_results("cpu"))


def _comparisons() -> pd.DataFrame:
    from typhoon.analysis import pairwise

    return pairwise.paired_comparisons(_results("cpu"), **FAST)


def _schedules(function) -> pd.DataFrame:
    from typhoon.studies.schedules import analysis as schedule_study

    return function(_results("schedules", tidy=True), schedule_study.schedule_hypothesis("schedules"))


def _bottleneck(function) -> pd.DataFrame:
    return function(pd.read_csv(REPO / "results" / "bottleneck" / "results.csv"))


# module -> function name -> how to call it (given the function) for a table whose columns are counted
CALLS: dict[str, dict[str, Callable]] = {
    "typhoon.analysis.pairwise": {
        "paired_comparisons": lambda f: f(_results("cpu"), **FAST),
        "paired_differences": lambda f: f(_results("cpu"), "primary_value", "typhoon", "random"),
        "paired_values": lambda f: f(_results("cpu")),
        "values_by_seed": lambda f: f(_results("cpu"), "primary_value", "typhoon", "random"),
        "holm_adjusted": lambda f: f(_comparisons()[["task", "backbone", "strategy_a", "strategy_b", "p"]], "typhoon"),
        "verdicts": lambda f: f(_comparisons()[["task", "backbone", "strategy_a", "strategy_b", "testable", "p_holm",
                                                "tost_p"]]),
    },
    "typhoon.analysis.paired": {
        "difference": lambda f: f(_pairs()),
        "t_test": lambda f: f(_pairs()),
        "tost": lambda f: f(_pairs(), margin=0.01),
        "wilcoxon": lambda f: f(_pairs()),
        "bootstrap_ci": lambda f: f(_pairs(), resamples=199),
        "stochastic_order": lambda f: f(_pairs(), iterations=50),
        "power": lambda f: f(_pairs(), dz=0.5),
    },
    "typhoon.analysis.run_summary": {
        "summarize": lambda f: f(_results("cpu")),
        "degenerate_rate": lambda f: f(_results("cpu")),
    },
    "typhoon.analysis.seed_budget": {
        "seeds_needed": lambda f: f(_comparisons()),
        "expected_max_performance": lambda f: f(_results("cpu")),
    },
    "typhoon.analysis.stats_tables": {
        "comparison_table": lambda f: f(_comparisons()),
    },
    "typhoon.studies.schedules.analysis": {
        "schedule_comparisons": _schedules,
        "schedule_pairs": _schedules,
        "metric_comparisons": _schedules,
        "loss_comparisons": _schedules,
        "display_table": lambda f: f(_schedules(importlib.import_module("typhoon.studies.schedules.analysis")
                                                .schedule_comparisons)),
    },
    "typhoon.analysis.bottleneck_verdict": {
        "bottleneck_verdict": lambda f: _bottleneck(f)[0],
        "bottleneck_comparisons": _bottleneck,
        "masking_of_strategies": _bottleneck,
    },
}


def _defined(node: ast.AST, prefix: str = ""):
    """(qualified name, def node) of every function under ``node``, methods and nested ones too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _defined(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _defined(child, f"{prefix}{child.name}.")


def functions(package: Path) -> list[dict]:
    """Every function under ``package/analysis``: module, qualified name, lines, parameters."""
    found = []
    for path in sorted((package / "analysis").rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for name, node in _defined(ast.parse(path.read_text(encoding="utf-8"))):
            a = node.args
            found.append(dict(module=module, function=name, lines=node.end_lineno - node.lineno + 1,
                              parameters=len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                              + (a.vararg is not None) + (a.kwarg is not None)))
    return found


def columns(module: str, function: str) -> int | None:
    """How many columns ``module.function`` returns on its committed run (None: not a listed table)."""
    call = CALLS.get(module, {}).get(function)
    if call is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return len(call(getattr(importlib.import_module(module), function)).columns)


def shapes(package: Path, everything: bool = False) -> pd.DataFrame:
    rows = []
    for f in functions(package):
        f["columns"] = columns(f["module"], f["function"])
        if everything or f["columns"] is not None or f["lines"] > LONG_LINES or f["parameters"] > MANY_PARAMETERS:
            rows.append(f)
    table = pd.DataFrame(rows, columns=["module", "function", "lines", "parameters", "columns"])
    table["module"] = table["module"].str.removeprefix("typhoon.analysis.")
    table["columns"] = [("-" if c is None or pd.isna(c) else str(int(c))) for c in table["columns"]]
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="every function, not only the long ones and the tables")
    parser.add_argument("--package", type=Path, default=REPO / "typhoon", help="the package whose source is read")
    args = parser.parse_args()
    table = shapes(args.package, args.all)
    print(table.to_string(index=False))
    every = functions(args.package)
    print(f"\n{len(every)} functions in {args.package}/analysis; over {LONG_LINES} lines: "
          f"{sum(f['lines'] > LONG_LINES for f in every)}; over {MANY_PARAMETERS} parameters: "
          f"{sum(f['parameters'] > MANY_PARAMETERS for f in every)}")


if __name__ == "__main__":
    main()
