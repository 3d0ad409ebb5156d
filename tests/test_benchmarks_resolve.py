"""The benchmarks and scripts name only what the package has: every ``module.name`` they use of an
imported ``typhoon`` module (``from typhoon.training import step`` ... ``step.make_optimizer``) and every
name they import from one exists, read from their source in the fast tier. (Each also makes a tiny real run in
the slow tier, tests/test_entry_points.py, which finds what a name check cannot: a call with the wrong arguments.)
The same holds for the notebooks under ``notebooks/`` that every study executes (fast tier: a moved name fails here,
not in a study's analysis hours later) and for the executed copies committed under ``results/``: a reader reruns
them where they lie."""

import ast
import importlib
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*(REPO / "benchmarks").glob("*.py"), *(REPO / "scripts").glob("*.py")])


def notebook_source(path: Path) -> str:
    """A notebook's code cells as one script (IPython's ``%`` and ``!`` lines left out)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    lines = [line for cell in cells if cell["cell_type"] == "code"
             for line in "".join(cell["source"]).splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def typhoon_references(path: Path, source: str | None = None) -> list[tuple[int, str, str]]:
    """(line, module, attribute) for each name the script (or ``source``, read from it) takes from a typhoon module."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source, filename=str(path))
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


def has_name(module: str, name: str) -> bool:
    """Whether typhoon module ``module`` exists and has ``name``."""
    try:
        return hasattr(importlib.import_module(module), name)
    except ModuleNotFoundError:
        return False


def _is_module(qualified: str) -> bool:
    try:
        return importlib.util.find_spec(qualified) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_typhoon_name_a_script_uses_exists(path):
    missing = [f"line {line}: {module}.{name}" for line, module, name in typhoon_references(path)
               if not has_name(module, name)]
    assert not missing, f"{path.relative_to(REPO)} uses names the package does not have: {missing}"


@pytest.mark.parametrize("path", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_every_typhoon_name_a_notebook_uses_exists(path):
    missing = [f"line {line}: {module}.{name}" for line, module, name in typhoon_references(path, notebook_source(path))
               if not has_name(module, name)]
    assert not missing, f"{path.relative_to(REPO)} uses names the package does not have: {missing}"


@pytest.mark.results
def test_every_typhoon_name_a_committed_notebook_uses_exists():
    """Every executed notebook under results/ (analysis and run notebooks): one test, listing each miss."""
    notebooks = sorted((REPO / "results").glob("*/notebooks/**/*.ipynb"))
    assert notebooks, "no committed notebooks found"
    missing = [f"{path.relative_to(REPO)} line {line}: {module}.{name}" for path in notebooks
               for line, module, name in typhoon_references(path, notebook_source(path)) if not has_name(module, name)]
    assert not missing, f"committed notebooks use names the package does not have: {missing[:20]} ({len(missing)} in all)"


def test_the_check_sees_a_missing_name(tmp_path):
    script = tmp_path / "bench_x.py"
    script.write_text("from typhoon.records import run_record\nfrom typhoon.config import RunConfig, NoSuchThing\n"
                      "run_record.write_record\nrun_record.no_such_function\n", encoding="utf-8")
    refs = typhoon_references(script)
    missing = [(m, n) for _, m, n in refs if not has_name(m, n)]
    assert sorted(missing) == [("typhoon.config", "NoSuchThing"), ("typhoon.records.run_record", "no_such_function")]
    assert not has_name("typhoon.no_such_module", "anything")
