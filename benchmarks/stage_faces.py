"""Count the imports that go around a stage's face, and the private names that cross a module.

    python benchmarks/stage_faces.py [PACKAGE_DIR] [--list]

A *stage* is the first component under the package: a subpackage (``typhoon/analysis``) or a top-level
module (``typhoon/config.py``, its own face). A subpackage's face is its ``__init__``: the names other
stages may use. Read from the AST of every module (function-level imports included):

* **bypassing imports**: a module of one stage importing a module *inside* another stage's subpackage
  (``from typhoon.masking.saliency import X``, ``import typhoon.masking.saliency``, ``from ..masking import
  saliency``, ``from typhoon.masking import saliency``) instead of a name from its face
  (``from typhoon.masking import X``). A module the face lists in its ``__all__`` is one other stages may use
  whole (``plugins.load``): importing it, or a name from it, goes through the face. A name taken from a face
  must be in its ``__all__``. A subpackage the face lists (``analysis.kl``) is a face of its own, read the same
  way one level down: ``from typhoon.analysis.kl import rows_table`` goes through it, ``from
  typhoon.studies.kl_original.rows import rows_table`` around it.
* **private names crossing a module**: a name with one leading underscore (not a dunder) taken from another
  module of the package: ``from .run_summary import _strategy_order``, or ``run_summary._metric_of`` on an
  imported module. A private *module* (``typhoon/_faults.py``) is the package's own: its modules may import
  it, and that is counted apart (``--list`` shows it), not as a crossing.

Imports inside functions and under ``if TYPE_CHECKING:`` count too: a lazy import only hides a dependency,
and an annotation is a use. The faces' ``__all__`` are read by importing them (cheap: each face is lazy), so
run it with the package importable (``PYTHONPATH=$PWD``). tests/test_stage_faces.py runs the same functions
and fails on any finding.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "typhoon"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def stage_of(module: str) -> str:
    """``typhoon.studies.kl_gap.table`` -> ``analysis``; ``typhoon.config`` -> ``config``; ``typhoon`` -> ``__init__``."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "__init__"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imports_of(name: str, path: Path, tree: ast.AST):
    """(line, module, names, alias) for each import in the module at any depth, relative ones resolved:
    ``import a.b as c`` gives (line, "a.b", None, its alias), ``from a import b`` (line, "a", [b's alias], None)."""
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None, alias
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module, node.names, None


def face_exports(package: Path, face: str) -> set[str] | None:
    """The ``__all__`` of a subpackage's face (None where it has none), read by importing it from ``package``."""
    sys.path.insert(0, str(package.parent))
    try:
        module = importlib.import_module(face)
    finally:
        sys.path.remove(str(package.parent))
    expected = package.parent.joinpath(*face.split("."), "__init__.py")
    if Path(module.__file__).resolve() != expected.resolve():
        raise RuntimeError(f"{face} was imported from {module.__file__}, not {expected}: put {package.parent} first "
                           "on PYTHONPATH")
    exported = getattr(module, "__all__", None)
    return None if exported is None else set(exported)


def find_bypasses(package: Path = PACKAGE) -> list[str]:
    """``file:line: module imports target`` for each import that goes around another stage's face: an
    internal module the face does not list, or a name the face does not export."""
    files = module_files(package)
    root = min(files, key=len)
    faces = {m for m in files if m.count(".") == 1 and files[m].name == "__init__.py"}  # the subpackages
    packages = {m for m in files if files[m].name == "__init__.py"}  # a face at any depth
    exports: dict[str, set[str] | None] = {}

    def exported(face: str) -> set[str]:
        if face not in exports:
            exports[face] = face_exports(package, face)
        return exports[face] or set()

    found = []
    for name, path in files.items():
        where = path.relative_to(package.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module, names, _ in imports_of(name, path, tree):
            targets = [module] if names is None else [
                f"{module}.{a.name}" if f"{module}.{a.name}" in files else module for a in names]
            for target, alias in zip(targets, names or [None] * len(targets), strict=True):
                if target not in files or target == root or stage_of(target) == stage_of(name):
                    continue
                face = f"{root}.{stage_of(target)}"
                if face not in faces:
                    continue  # a top-level module is its own face
                # down from the stage's face: each step a module or subpackage the face above lists; a
                # subpackage it lists is a face of its own, the next step read against it
                for part in target.split(".")[face.count(".") + 1:]:
                    if part not in exported(face) or f"{face}.{part}" not in files:
                        break
                    face = f"{face}.{part}"
                    if face not in packages:
                        break  # a module the face lists: used whole, and every name in it
                if face != target:
                    found.append(f"{where}:{line}: {name} imports {target}")
                elif alias is not None and target == module and target in packages and alias.name not in exported(target):
                    found.append(f"{where}:{line}: {name} imports {target}.{alias.name}, not in the face's __all__")
    return sorted(set(found), key=lambda f: (f.split(":")[0], int(f.split(":")[1]), f))


def private_takes(package: Path = PACKAGE) -> list[tuple[str, bool]]:
    """(``file:line: module takes target``, whether ``target`` is a private module) for each private name taken
    from another module of the package: imported, or read as an attribute of an imported module."""
    files = module_files(package)
    root = min(files, key=len)
    found = set()
    for name, path in files.items():
        where = path.relative_to(package.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        modules_here: dict[str, str] = {}  # a local name bound to a module of the package -> that module
        for line, module, names, alias in imports_of(name, path, tree):
            if names is None:
                if module.split(".")[0] != root:
                    continue
                modules_here[alias.asname or root] = module if alias.asname else root
                if any(is_private(part) for part in module.split(".")[1:]):
                    found.add((f"{where}:{line}: {name} takes {module}", module in files))
                continue
            if module not in files:
                continue
            for a in names:
                target = f"{module}.{a.name}"
                if target in files:
                    modules_here[a.asname or a.name] = target
                if is_private(a.name) and target != name:
                    found.add((f"{where}:{line}: {name} takes {target}", target in files))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if not isinstance(value, ast.Name) or value.id not in modules_here:
                continue
            owner = modules_here[value.id]  # the module the private attribute is read from: down the chain
            for part in reversed(chain[1:]):
                if f"{owner}.{part}" not in files:
                    break
                owner = f"{owner}.{part}"
            else:
                target = f"{owner}.{node.attr}"
                if owner != name:
                    found.add((f"{where}:{node.lineno}: {name} takes {target}", target in files))
    return sorted(found, key=lambda f: (f[0].split(":")[0], int(f[0].split(":")[1]), f[0]))


def find_private_crossings(package: Path = PACKAGE) -> list[str]:
    """``file:line: module takes target`` for each private name taken from another module (not a private
    module of the package: that one is the package's own)."""
    return [line for line, is_module in private_takes(package) if not is_module]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", nargs="?", type=Path, default=PACKAGE)
    parser.add_argument("--list", action="store_true", help="list each finding, not only the counts")
    args = parser.parse_args(argv)
    bypasses, takes = find_bypasses(args.package), private_takes(args.package)
    privates = [line for line, is_module in takes if not is_module]
    private_modules = [line for line, is_module in takes if is_module]
    if args.list:
        print("\n".join(["imports bypassing a stage's face:", *bypasses, "", "private names crossing a module:",
                         *privates, "", "imports of a private module of the package (not counted):",
                         *private_modules, ""]))
    print(f"{len(bypasses)} import(s) bypassing a stage's face, {len(privates)} private name(s) crossing a module "
          f"(and {len(private_modules)} import(s) of a private module)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
