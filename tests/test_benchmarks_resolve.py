"""The benchmark and helper scripts name only what the package has: every ``module.name`` they use of an
imported ``typhoon`` module (``from typhoon.training import step`` ... ``step.make_optimizer``) and every
name they import from one exists. They are not run in CI (they take minutes and time a machine), so
without this check a moved or renamed function leaves a benchmark broken until someone needs its figure."""

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*(REPO / "benchmarks").glob("*.py"), *(REPO / "scripts").glob("*.py")])


def typhoon_references(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, attribute) for each name the script takes from a typhoon module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "typhoon":
            for alias in node.names:
                qualified = f"{node.module}.{alias.name}"
                if importlib.util.find_spec(node.module) is not None and _is_module(qualified):
                    aliases[alias.asname or alias.name] = qualified
                else:
                    found.append((node.lineno, node.module, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "typhoon" and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found.append((node.lineno, aliases[node.value.id], node.attr))
    return found


def _is_module(qualified: str) -> bool:
    try:
        return importlib.util.find_spec(qualified) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_typhoon_name_a_script_uses_exists(path):
    missing = [f"line {line}: {module}.{name}" for line, module, name in typhoon_references(path)
               if not hasattr(importlib.import_module(module), name)]
    assert not missing, f"{path.relative_to(REPO)} uses names the package does not have: {missing}"


def test_the_check_sees_a_missing_name(tmp_path):
    script = tmp_path / "bench_x.py"
    script.write_text("from typhoon.records import run_record\nfrom typhoon.config import RunConfig, NoSuchThing\n"
                      "run_record.write_record\nrun_record.no_such_function\n", encoding="utf-8")
    refs = typhoon_references(script)
    missing = [(m, n) for _, m, n in refs if not hasattr(importlib.import_module(m), n)]
    assert sorted(missing) == [("typhoon.config", "NoSuchThing"), ("typhoon.records.run_record", "no_such_function")]
