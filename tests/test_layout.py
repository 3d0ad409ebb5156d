"""The package's layout: no import cycle among typhoon's modules (function-level imports count: a lazy import
only hides a dependency), none among its stages either (the stage graph is a DAG, in the order docs/layout.md
states, with its listed exceptions), and every module short enough to read (under 500 lines).

The import graph is built here from the source (an AST walk, no other tool): an edge A -> B for every
``import B`` / ``from B import x`` in A, at any depth, and A -> B.x where ``x`` is itself a module; a module's imports of its own package or subpackages
are not edges (importing a package's child runs the package first; that is not a cycle). A second graph follows each
name taken from a stage's lazy face to the module that defines it, so that a cycle through the faces is seen too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from typhoon import face_table

PACKAGE = Path(__file__).resolve().parents[1] / "typhoon"
LAYOUT_DOC = PACKAGE.parent / "docs" / "layout.md"
MAX_LINES = 500
# Over the limit for a stated reason, to be removed when the reason goes (a waiver no longer needed fails).
WAIVED: dict[str, str] = {}


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package (data folders included: they are code)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_targets(name: str, path: Path) -> set[str]:
    """Every dotted name that ``name`` (defined in ``path``) imports anywhere in its source, at any depth:
    ``import B`` gives B, ``from B import x`` gives B and B.x (relative imports resolved)."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)
    return targets


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``name`` (defined in ``path``) imports anywhere in its source."""
    return {t for t in import_targets(name, path) if t in modules and t != name
            and not name.startswith(t + ".") and not t.startswith(name + ".")}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = module_files(package)
    return {name: imported_modules(name, path, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe_cycles(graph: dict[str, set[str]]) -> str:
    """Each cycle of ``graph`` and the edges that close it ("" when it has none)."""
    return "; ".join(" <-> ".join(c) + " (" + ", ".join(f"{a} -> {sorted(graph[a] & set(c))}" for a in c) + ")"
                     for c in cycles(graph))


def test_no_import_cycle():
    found = describe_cycles(import_graph())
    assert not found, f"import cycles: {found}"


def test_the_cycle_check_sees_a_function_level_cycle(tmp_path):
    """The check can fail: a cycle hidden behind an import inside a function is found, and so is one through
    a relative import; a child importing its own package is not a cycle."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub import c\n")
    (pkg / "sub" / "c.py").write_text("import pkg.sub\n\ndef g():\n    from .. import a\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub.c"] == {"pkg.a"} and graph["pkg.sub"] == set()
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    (pkg / "b.py").write_text("def f():\n    pass\n")
    assert cycles(import_graph(pkg)) == []


def import_graph_through_faces(package: Path = PACKAGE) -> dict[str, set[str]]:
    """:func:`import_graph`, with each name taken from a lazy face (``from typhoon.runner import
    stop_on_signals``) followed to the module that defines it (typhoon.runner.stop: the face's ``if
    TYPE_CHECKING:`` import of it, :func:`typhoon.face_table`). The plain graph stops at the face, whose imports
    of its own modules are no edges: a cycle that runs through two faces is only seen here."""
    files = module_files(package)
    faces = {name: face_table(name, path)[0] for name, path in files.items()
             if path.name == "__init__.py" and "lazy_face(__name__, __file__)" in path.read_text(encoding="utf-8")}
    graph = import_graph(package)
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                module = (".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                          if node.level else node.module)
                homes = faces.get(module, {}) if module != name else {}
                graph[name] |= {homes[alias.name] for alias in node.names if homes.get(alias.name, name) != name}
    return graph


def test_no_import_cycle_through_the_faces():
    found = describe_cycles(import_graph_through_faces())
    assert not found, f"import cycles through the faces: {found}"


def test_the_cycle_check_through_the_faces_sees_a_cycle_the_plain_one_cannot(tmp_path):
    """Two stages, each module taking a name of the other through its face: no edge of the plain graph closes
    the loop (a face's imports of its own modules are none), the graph through the faces does."""
    pkg = tmp_path / "pkg"
    for stage, other in (("low", "high"), ("high", "low")):
        (pkg / stage).mkdir(parents=True)
        (pkg / stage / "__init__.py").write_text(
            f'"""{stage}."""\n\nfrom typing import TYPE_CHECKING\n\nfrom typhoon import lazy_face\n\n'
            f"if TYPE_CHECKING:\n    from pkg.{stage}.inner import {stage}_thing\n\n"
            "__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)\n")
        (pkg / stage / "inner.py").write_text(f"def {stage}_thing():\n    from pkg.{other} import {other}_thing\n")
    (pkg / "__init__.py").write_text("")
    assert cycles(import_graph(pkg)) == []
    assert cycles(import_graph_through_faces(pkg)) == [["pkg.high.inner", "pkg.low.inner"]]
    (pkg / "high" / "inner.py").write_text("def high_thing():\n    pass\n")
    assert cycles(import_graph_through_faces(pkg)) == []


# --------------------------------------------------------------------------------------------------
# Stages: the first component under typhoon/ (a subpackage such as ``analysis``, or a top-level module such as
# ``config``); the package's own __init__ is the stage ``__init__``.


def stage_of(module: str) -> str:
    """``typhoon.studies.kl_gap.table`` -> ``analysis``, ``typhoon.config`` -> ``config``, ``typhoon`` -> ``__init__``."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "__init__"


def stage_graph(package: Path = PACKAGE) -> dict[str, dict[str, set[str]]]:
    """Stage -> {stage it imports: the module imports behind that edge, as ``"a -> b"``}, from every import of
    every module (function level included). An import of the package itself (``import typhoon`` for its
    version) is no edge: every module runs the package first. The package's own imports are its stage's."""
    files = module_files(package)
    graph: dict[str, dict[str, set[str]]] = {stage_of(name): {} for name in files}
    for name, path in files.items():
        targets = {t for t in import_targets(name, path) if t in files and t != package.name}
        for target in targets:
            if any(other.startswith(target + ".") for other in targets):
                continue  # ``from pkg.low import a`` names pkg.low.a (the package comes with it)
            a, b = stage_of(name), stage_of(target)
            if a != b:
                graph[a].setdefault(b, set()).add(f"{name} -> {target}")
    return graph


def find_cycle(graph: dict[str, set[str]] | dict[str, dict]) -> list[str]:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``; [] when it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str]:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return []

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return []


def describe_cycle(graph: dict[str, dict[str, set[str]]], cycle: list[str]) -> str:
    def imports(a: str, b: str) -> str:
        found = sorted(graph[a][b])
        return ", ".join(found[:3]) + (f", and {len(found) - 3} more" if len(found) > 3 else "")

    steps = [f"{a} -> {b} ({imports(a, b)})" for a, b in zip(cycle[:-1], cycle[1:], strict=True)]
    return " -> ".join(cycle) + ": " + "; ".join(steps)


def test_the_stages_have_no_import_cycle():
    """No import, at module or function level, goes from one stage to a stage that (directly or through
    others) imports it: the stage graph is a DAG."""
    graph = stage_graph()
    cycle = find_cycle(graph)
    assert not cycle, "stage import cycle: " + describe_cycle(graph, cycle)


def documented_stages(text: str) -> tuple[list[str], set[tuple[str, str]]]:
    """docs/layout.md's stage order (the ```stages block, one stage a line) and the edges it lists as going
    against that order (bullets ``- `a` -> `b`: why`` under "Edges against the order")."""
    blocks = re.findall(r"^```stages\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) == 1, "docs/layout.md needs exactly one ```stages block (the stage order)"
    order = [line.split()[0] for line in blocks[0].splitlines() if line.strip()]
    assert len(order) == len(set(order)), f"a stage is listed twice in the order: {order}"
    section = text.split("Edges against the order", 1)
    assert len(section) == 2, 'docs/layout.md needs its "Edges against the order" list'
    listed = set()
    for line in section[1].splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("- "):
            match = re.match(r"- `(\w+)` -> `(\w+)`: \S", line)
            assert match, f"docs/layout.md: an edge must read '- `a` -> `b`: why', got {line!r}"
            listed.add((match[1], match[2]))
    return order, listed


def upward_edges(graph: dict[str, dict[str, set[str]]], order: list[str]) -> set[tuple[str, str]]:
    """The edges ``a -> b`` of ``graph`` where ``b`` comes after ``a`` in ``order``."""
    rank = {stage: i for i, stage in enumerate(order)}
    return {(a, b) for a, targets in graph.items() for b in targets if rank[b] > rank[a]}


def check_documented_order(graph: dict[str, dict[str, set[str]]], text: str) -> list[str]:
    """What docs/layout.md's stage order and exceptions get wrong about ``graph`` (empty: they match)."""
    order, listed = documented_stages(text)
    problems = []
    if set(order) != set(graph):
        problems.append(f"stages in the code but not in the order: {sorted(set(graph) - set(order))}; "
                        f"in the order but not in the code: {sorted(set(order) - set(graph))}")
        return problems
    found = upward_edges(graph, order)
    for a, b in sorted(found - listed):
        problems.append(f"{a} -> {b} goes against the documented order but is not listed "
                        f"({', '.join(sorted(graph[a][b]))})")
    for a, b in sorted(listed - found):
        why = "is no import" if b not in graph.get(a, {}) else "goes with the order"
        problems.append(f"{a} -> {b} is listed as against the order but {why}")
    return problems


def test_docs_layout_states_the_stage_order_and_its_exceptions():
    """docs/layout.md's stage order holds in the code: every import that goes against it is listed there,
    and every listed one exists."""
    problems = check_documented_order(stage_graph(), LAYOUT_DOC.read_text(encoding="utf-8"))
    assert not problems, "docs/layout.md's dependency section does not match the code:\n" + "\n".join(problems)


def test_the_stage_checks_can_fail(tmp_path):
    """A cycle between stages through a function-level import is found and named; an edge against the
    documented order that is not listed, and a listed one that is not there, are both reported."""
    pkg = tmp_path / "pkg"
    for stage in ("low", "high"):
        (pkg / stage).mkdir(parents=True)
        (pkg / stage / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("import pkg\n")  # the package itself: no edge
    (pkg / "low" / "a.py").write_text("from pkg import base\n")
    (pkg / "high" / "b.py").write_text("from pkg.low import a\n")
    graph = stage_graph(pkg)
    assert graph["high"] == {"low": {"pkg.high.b -> pkg.low.a"}} and graph["base"] == {}
    assert find_cycle(graph) == []
    doc = "```stages\n__init__\nbase\nlow\nhigh\n```\nEdges against the order:\n\n"
    assert check_documented_order(graph, doc) == []
    assert check_documented_order(graph, doc + "- `low` -> `high`: a reason\n") == [
        "low -> high is listed as against the order but is no import"]
    (pkg / "low" / "c.py").write_text("def f():\n    from ..high import b\n")
    graph = stage_graph(pkg)
    assert find_cycle(graph) == ["high", "low", "high"]
    assert describe_cycle(graph, find_cycle(graph)) == (
        "high -> low -> high: high -> low (pkg.high.b -> pkg.low.a); low -> high (pkg.low.c -> pkg.high.b)")
    assert check_documented_order(graph, doc) == [
        "low -> high goes against the documented order but is not listed (pkg.low.c -> pkg.high.b)"]
    assert check_documented_order(graph, doc + "- `low` -> `high`: a reason\n") == []


def line_counts(package: Path = PACKAGE) -> dict[str, int]:
    return {path.relative_to(package).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in sorted(package.rglob("*.py"))}


def test_every_module_is_under_500_lines():
    counts = line_counts()
    long = {name: n for name, n in counts.items() if n >= MAX_LINES and name not in WAIVED}
    assert not long, f"modules of {MAX_LINES} lines or more (split them by what they hold): {long}"


@pytest.mark.parametrize("name", sorted(WAIVED))
def test_a_waiver_is_still_needed(name):
    counts = line_counts()
    assert name in counts, f"{name} is waived but does not exist: remove it from WAIVED"
    assert counts[name] >= MAX_LINES, f"{name} has {counts[name]} lines now: remove its waiver ({WAIVED[name]})"


def test_every_module_says_what_it_holds():
    """Each module opens with a docstring (docs/layout.md's one line per module is drawn from them)."""
    missing = [name for name, path in module_files().items()
               if ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None]
    assert not missing, f"modules without a docstring: {missing}"
