"""Typhoon reproducibility bundle: which tokens to mask in masked language modelling."""

import ast as _ast
import importlib as _importlib
import sys as _sys
from pathlib import Path as _Path

__version__ = "0.1.0"


def face_table(package: str, face_file: str | _Path) -> tuple[dict[str, str], tuple[str, ...]]:
    """What a stage's face lists, read from the imports of its ``if TYPE_CHECKING:`` block (the one place they
    are written): each name and the module of the stage that defines it (``from typhoon.runner.stop import
    exit_finished`` gives ``{"exit_finished": "typhoon.runner.stop"}``), and the modules of the stage other
    stages use whole (``from typhoon.runner import estimate`` gives ``"estimate"``).

    The block holds only ``from <this package>... import name, ...`` lines: anything else there (an alias, a
    plain ``import``, a module outside the package, a name listed twice) is a ValueError naming the line.
    """
    path = _Path(face_file)
    homes: dict[str, str] = {}
    namespaces: list[str] = []
    for block in _ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        test = block.test if isinstance(block, _ast.If) else None
        if not (isinstance(test, _ast.Name) and test.id == "TYPE_CHECKING"):
            continue
        for node in block.body:
            where = f"{path}:{node.lineno}"
            if not isinstance(node, _ast.ImportFrom) or node.level:
                raise ValueError(f"{where}: a face's TYPE_CHECKING block holds only absolute "
                                 f"'from {package}... import name' lines")
            if node.module != package and not node.module.startswith(f"{package}."):
                raise ValueError(f"{where}: {node.module} is not a module of {package}: a face lists its own")
            for alias in node.names:
                if alias.asname is not None:
                    raise ValueError(f"{where}: {alias.name} as {alias.asname}: a face gives no other name")
                if alias.name in homes or alias.name in namespaces:
                    raise ValueError(f"{where}: {alias.name} is listed twice")
                if node.module == package:
                    namespaces.append(alias.name)
                else:
                    homes[alias.name] = node.module
    return homes, tuple(namespaces)


def lazy_face(package: str, face_file: str):
    """The ``__getattr__``, ``__dir__`` and ``__all__`` (PEP 562) of a stage's face,
    ``typhoon/<stage>/__init__.py``, from the imports of its ``if TYPE_CHECKING:`` block (:func:`face_table`).

    The block is what readers, type checkers and the import checks see: each name the face lists, imported from
    the module of the stage that defines it, and each module that other stages use whole (``plugins.load``).
    It is never run: a name is imported from its module when another module first asks for it. A face that
    imported its modules eagerly would make the light ones pay for the heavy (``typhoon.cli`` imports
    ``records.locks``; ``records.run_record`` imports pandas). Nothing is cached in the face: the name is
    looked up in its module each time, so a test that patches it there is seen by every importer, and undone
    with it.
    """
    homes, namespaces = face_table(package, face_file)

    def __getattr__(name: str):
        if name in namespaces:
            return _importlib.import_module(f"{package}.{name}")
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = _importlib.import_module(home)
        try:
            return getattr(module, name)
        except AttributeError:
            raise AttributeError(f"{package}'s face lists {name} from {home}, which defines no {name}") from None

    def __dir__() -> list[str]:
        return sorted({*vars(_sys.modules[package]), *homes, *namespaces})

    return __getattr__, __dir__, [*homes, *namespaces]


# Before a notebook imports datasets or transformers (see typhoon.progress_bars). Only a Jupyter
# kernel, which has IPython loaded, needs it: the command line skips importing tqdm (up to a second at
# start-up, on a busy machine), so that bad input is answered at once.
if "IPython" in _sys.modules:
    from typhoon.progress_bars import quiet_tqdm_auto as _quiet_tqdm_auto

    _quiet_tqdm_auto()
