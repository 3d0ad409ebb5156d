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
import re
import subprocess
import sys
from pathlib import Path

import pytest

from typhoon import face_table

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
                       "the face's TYPE_CHECKING imports):\n" + "\n".join(found))


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
    homes, namespaces = face_table(face, module.__file__)
    folder = PACKAGE.joinpath(*face.split(".")[1:])
    modules = {path.stem for path in folder.glob("*.py")} | {path.parent.name for path in folder.glob("*/__init__.py")}
    wrong = [f"{name}: {home} defines no {name}" for name, home in homes.items()
             if name not in top_level_names(PACKAGE.parent.joinpath(*home.split(".")).with_suffix(".py"))]
    wrong += [f"{name}: also a module of the stage" for name in homes if name in modules]
    wrong += [f"{name}: listed as used whole, not a module of the stage" for name in namespaces if name not in modules]
    assert not wrong, f"{face}: " + "; ".join(wrong)


def type_checking_imports(path: Path) -> tuple[list[str], list[ast.stmt]]:
    """The names a face's ``if TYPE_CHECKING:`` block imports, and its other top-level statements."""
    names, others = [], []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            names += [alias.asname or alias.name for child in node.body for alias in child.names]
        else:
            others.append(node)
    return names, others


@pytest.mark.parametrize("face", FACES)
def test_a_face_names_its_modules_by_import_only(face):
    """A face's table is its ``if TYPE_CHECKING:`` imports, which the import checks, readers and type checkers
    see: ``__all__`` and ``dir()`` are those names, and the face holds no other statement than its docstring,
    the imports of ``TYPE_CHECKING`` and ``lazy_face``, and the line that calls it (no string naming a module)."""
    module = importlib.import_module(face)
    names, others = type_checking_imports(Path(module.__file__))
    assert names and sorted(module.__all__) == sorted(names), f"{face}: __all__ is not its TYPE_CHECKING imports"
    assert set(names) <= set(dir(module))
    allowed = {'"""docstring"""', "from __future__ import annotations", "from typing import TYPE_CHECKING",
               "from typhoon import lazy_face", "__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)"}
    extra = [ast.unparse(node) for node in others[1:]] + ([] if ast.get_docstring(ast.Module(others[:1], [])) else
                                                           [ast.unparse(others[0])])
    assert not set(extra) - allowed, f"{face} holds more than its imports: {sorted(set(extra) - allowed)}"


ALLOWED_IMPORT_BY_NAME = {  # a module imported from a string, each for a stated reason
    "typhoon/__init__.py": "lazy_face: the names of a face's own import lines",
    "typhoon/masking/plugins.py": "a user's strategy module",
    "typhoon/studies/registry.py": "a user's study module",
}


def test_no_module_of_the_package_is_imported_from_a_string():
    """No module imports the package's own modules by a name in a string (importlib, ``__import__``) that the
    import checks cannot see: only a user's plugins and the faces' lazy loading do; and no string outside a
    docstring names a module of the package as ``module`` or ``module:attribute``."""
    modules = {".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
               for path in PACKAGE.rglob("*.py")}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and ast.get_docstring(node) is not None}
        for node in ast.walk(tree) if where not in ALLOWED_IMPORT_BY_NAME else ():
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("import_module", "__import__"):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node.func)}(...)")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                # "typhoon.runner.cells" or "typhoon.runner.cells:run_cell"; "saliency:TyphoonMasking" (within a stage)
                named = re.fullmatch(r"([\w.]+)(:\w+)?", node.value)
                if named and (named[1] in modules - {"typhoon"}
                              or named[2] and any(module.endswith(f".{named[1]}") for module in modules)):
                    found.append(f"{where}:{node.lineno}: {node.value!r}")
    assert not found, "the package's modules named in strings:\n" + "\n".join(found)


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


def plant_face(folder: Path, name: str, block: str) -> str:
    """A package ``name`` in ``folder`` with a module ``things`` (``defined = 1``) and a face whose TYPE_CHECKING
    block is ``block`` (``{pkg}`` for the package's name); returns ``name``."""
    (folder / name).mkdir(parents=True)
    (folder / name / "things.py").write_text("defined = 1\n")
    (folder / name / "__init__.py").write_text(
        '"""A planted face."""\n\nfrom typing import TYPE_CHECKING\n\nfrom typhoon import lazy_face\n\n'
        f"if TYPE_CHECKING:\n{block.format(pkg=name)}\n__getattr__, __dir__, __all__ = lazy_face(__name__, __file__)\n")
    return name


def test_a_face_fails_clearly_on_a_name_its_module_lacks_and_on_other_lines(tmp_path, monkeypatch):
    """A name the face lists that its module does not define is an AttributeError naming the name and the
    module (at first use); a line of the block that is not ``from <package>... import name`` is refused when
    the face is imported, naming the line."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = plant_face(tmp_path, f"planted_{tmp_path.name}",
                      "    from {pkg} import things\n    from {pkg}.things import defined, missing\n")
    face = importlib.import_module(name)
    assert face.__all__ == ["defined", "missing", "things"] and face.defined == 1 and face.things.defined == 1
    with pytest.raises(AttributeError, match=f"{name}'s face lists missing from {name}.things, which defines no missing"):
        face.missing  # noqa: B018
    for i, bad in enumerate(["    from {pkg}.things import defined as other\n", "    import {pkg}.things\n",
                             "    from os.path import join\n", "    from .things import defined\n",
                             "    from {pkg}.things import defined\n    from {pkg}.things import defined\n"]):
        with pytest.raises(ValueError, match=r"__init__\.py:\d+: "):
            importlib.import_module(plant_face(tmp_path, f"{name}_bad{i}", bad))
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


@pytest.mark.slow  # a fresh interpreter
def test_the_quick_faces_import_no_pandas():
    """The command line and the runner's face, and a name of the runner read through it (stop), load no pandas or
    torch: the face's imports are under TYPE_CHECKING, never run."""
    code = ("import json, sys\nimport typhoon.cli, typhoon.runner\nassert callable(typhoon.runner.stop_on_signals)\n"
            "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "typhoon" in loaded and not {"pandas", "torch"} & loaded, sorted({"pandas", "torch"} & loaded)


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
