"""Every stage's ``__init__`` is its face: another stage imports only the names it lists in ``__all__`` (and
the modules it lists there, used whole), and no private name (``_x``) is taken from another module. The
checks are benchmarks/stage_faces.py's (which counts them): an AST walk of every module, function-level
imports included. Tests may still import a stage's internals; the package's own modules may not.

The faces are lazy (PEP 562): importing one loads none of its modules, and a name is read from its module
each time, so a test that patches it there is seen through the face, and undone with it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "typhoon"
_spec = importlib.util.spec_from_file_location("stage_faces", REPO / "benchmarks" / "stage_faces.py")
stage_faces = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stage_faces)

# every stage's face, and the lazy faces one level down (analysis.kl: a package of a stage with a face of its own)
FACES = sorted([f"typhoon.{path.parent.name}" for path in PACKAGE.glob("*/__init__.py")]
               + [f"typhoon.{path.parent.parent.name}.{path.parent.name}" for path in PACKAGE.glob("*/*/__init__.py")
                  if "lazy_face(" in path.read_text(encoding="utf-8")])
HEAVY = ("torch", "transformers", "pandas", "numpy", "scipy", "matplotlib", "datasets", "evaluate")


def test_no_import_goes_around_a_stage_face():
    found = stage_faces.find_bypasses()
    assert not found, ("imports that go around a stage's face (import the name from the stage, and list it in "
                       "the face's _HOMES):\n" + "\n".join(found))


def test_no_private_name_crosses_a_module():
    found = stage_faces.find_private_crossings()
    assert not found, ("private names taken from another module (make them public where they are defined, or "
                       "move them where they are used):\n" + "\n".join(found))


def test_every_stage_has_a_face_with_a_docstring_and_an_all():
    for face in FACES:
        module = importlib.import_module(face)
        assert module.__doc__ and module.__doc__.strip(), f"{face} has no docstring saying what the stage is"
        assert isinstance(getattr(module, "__all__", None), list), f"{face} has no __all__"
        assert len(module.__all__) == len(set(module.__all__)), f"{face} lists a name twice"


def top_level_names(path: Path) -> set[str]:
    """The names a module binds at its top level (defined or imported)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {t.id for t in ast.walk(target) if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


@pytest.mark.parametrize("face", FACES)
def test_a_face_names_only_what_its_modules_define(face):
    """Each name of a face is defined in the module it says (read from the source: no torch imported), each
    module it lists as used whole exists, and no name is also a module of the stage (the module, once
    imported, would shadow the name)."""
    module = importlib.import_module(face)
    homes = getattr(module, "_HOMES", {})
    folder = PACKAGE.joinpath(*face.split(".")[1:])
    modules = {path.stem for path in folder.glob("*.py")} | {path.parent.name for path in folder.glob("*/__init__.py")}
    wrong = [f"{name}: {home}.py defines no {name}" for name, home in homes.items()
             if name not in top_level_names(folder / f"{home}.py")]
    wrong += [f"{name}: also a module of the stage" for name in homes if name in modules]
    wrong += [f"{name}: listed in __all__, neither a name of _HOMES nor a module" for name in module.__all__
              if name not in homes and name not in modules]
    assert not wrong, f"{face}: " + "; ".join(wrong)


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_faces_loads_no_heavy_library():
    """A face loads its modules when a name is asked for: importing all of them costs no heavy library."""
    code = (f"import json, sys\nimport {', '.join(FACES)}\n"
            "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    heavy = sorted(set(HEAVY) & set(json.loads(done.stdout.strip().splitlines()[-1])))
    assert not heavy, f"importing the stages' faces imported {heavy}"


def test_a_name_is_read_through_the_face_from_its_module_each_time(monkeypatch):
    """Nothing is cached in a face: a test that patches a name in its module is seen by every importer of the
    face, and undoing the patch restores it there too."""
    from typhoon import records
    from typhoon.records import locks

    original = records.pid_alive
    assert original is locks.pid_alive and "pid_alive" in dir(records) and "pid_alive" not in vars(records)
    monkeypatch.setattr(locks, "pid_alive", lambda pid: "patched")
    from typhoon.records import pid_alive

    assert pid_alive(1) == "patched" and records.pid_alive(1) == "patched"
    monkeypatch.undo()
    assert records.pid_alive is original
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        records.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        from typhoon.records import no_such_name  # noqa: F401


def test_the_checks_can_fail(tmp_path):
    """Planted in a package of two stages: imports of the other stage's internals (at module and function
    level, by name and by module), a name its face does not list, private names taken by import and by
    attribute; around a face one level down (a subpackage the stage's face lists), and a name that face does not
    list. Through the face, from a module it lists as used whole, through the nested face, and inside a stage: all
    allowed."""
    name = f"planted_{tmp_path.name}"
    pkg = tmp_path / name
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    (pkg / "__init__.py").write_text('"""A planted package."""\n')
    (pkg / "_secret.py").write_text("KEY = 1\n")
    (pkg / "low" / "__init__.py").write_text('"""The low stage."""\n\nfrom .inner import thing\n\n'
                                           '__all__ = ["thing", "whole", "nest"]\n')
    (pkg / "low" / "nest").mkdir()
    (pkg / "low" / "nest" / "__init__.py").write_text('"""A face one level down."""\n\nlisted = 1\n\n'
                                                    '__all__ = ["listed", "open"]\n')
    (pkg / "low" / "nest" / "open.py").write_text("used = 1\n")
    (pkg / "low" / "nest" / "closed.py").write_text("kept = 1\n")
    (pkg / "low" / "inner.py").write_text("thing = other = _hidden = 1\n")
    (pkg / "low" / "whole.py").write_text("from .inner import _hidden, other\n\nload = 1\n")
    (pkg / "high" / "__init__.py").write_text("")
    (pkg / "high" / "ok.py").write_text(
        f"from {name} import _secret\nfrom {name}.low import thing, whole\nfrom {name}.low.whole import load\n\n"
        f"def f():\n    from {name}.high import ok\n    return whole.load, ok\n")
    (pkg / "high" / "bad.py").write_text(
        f"from {name}.low.inner import other\nfrom {name}.low import inner\nfrom {name}.low import other as again\n\n"
        f"def f():\n    import {name}.low.inner\n    from {name}.low.inner import _hidden\n"
        f"    seen = inner._hidden\n    return seen, {name}.low.inner._hidden\n"
        f"from {name}.low.nest.closed import kept\nfrom {name}.low.nest import closed\n"
        f"from {name}.low.nest import unlisted\n")
    (pkg / "high" / "nested_ok.py").write_text(
        f"from {name}.low import nest\nfrom {name}.low.nest import listed, open\n"
        f"from {name}.low.nest.open import used\nimport {name}.low.nest\n")
    try:
        bypasses = stage_faces.find_bypasses(pkg)  # imports the planted faces, to read their __all__
    finally:
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]
    assert [line.split(": ", 1)[1] for line in bypasses] == [
        f"{name}.high.bad imports {name}.low.inner",
        f"{name}.high.bad imports {name}.low.inner",
        f"{name}.high.bad imports {name}.low.other, not in the face's __all__",
        f"{name}.high.bad imports {name}.low.inner",
        f"{name}.high.bad imports {name}.low.inner",
        f"{name}.high.bad imports {name}.low.nest.closed",
        f"{name}.high.bad imports {name}.low.nest.closed",
        f"{name}.high.bad imports {name}.low.nest.unlisted, not in the face's __all__",
    ]
    assert [int(line.split(":")[1]) for line in bypasses] == [1, 2, 3, 6, 7, 10, 11, 12]
    assert all(line.startswith(f"{name}/high/bad.py:") for line in bypasses)
    privates = stage_faces.find_private_crossings(pkg)
    assert [int(line.split(":")[1]) for line in privates] == [7, 8, 9, 1]
    assert [line.split(": ", 1)[1] for line in privates] == [
        f"{name}.high.bad takes {name}.low.inner._hidden",  # imported
        f"{name}.high.bad takes {name}.low.inner._hidden",  # inner._hidden
        f"{name}.high.bad takes {name}.low.inner._hidden",  # the dotted path
        f"{name}.low.whole takes {name}.low.inner._hidden",  # inside a stage, still another module
    ]
    assert [line.split(": ", 1)[1] for line, is_module in stage_faces.private_takes(pkg) if is_module] == [
        f"{name}.high.ok takes {name}._secret"]  # a private module is the package's own: not counted
