"""Masking strategies from outside the package: ``--strategy my_module:MyStrategy``.

A *spec* ``MODULE:CLASS`` names a class in a module importable from ``sys.path`` (the current folder when
``python -m typhoon`` runs there, or ``PYTHONPATH``); an installed package may also register one under the
entry-point group :data:`ENTRY_POINT_GROUP` (``name = "package.module:Class"``), which is then named by its
name alone. The class must subclass :class:`typhoon.masking.base.MaskingStrategy`, declare its ``name``
and its ``PARAMS`` (the base's ``p`` and ``corruption`` first, then its own ``Param``\\ s).

How a spec maps to a run's names: the class's ``name`` is the strategy's name everywhere a built-in's
name appears -- ``RunConfig.strategy``, the record folder ``runs/<task>/<backbone>/<name>/seed<N>``,
results.csv, the statistics and the report -- and the spec itself is kept in ``RunConfig.strategy_source``,
so a record says where its strategy came from and a notebook kernel can load it again. The name must be a
safe folder name (:data:`NAME`: lower-case letters, digits, ``_`` and ``-``) and no built-in strategy's
or alias's name; two loaded classes may not share one.

Refusals are ValueErrors that name what was wrong. :func:`check_spec` is cheap (no module is executed but a
dotted module's parent packages, no torch): the command line runs it before anything heavy; :func:`load`
then imports the module, which may import torch.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

from typhoon.masking.params import BASE_PARAMS, PLUGIN_STRATEGIES, Param, builtin_names

ENTRY_POINT_GROUP = "typhoon.strategies"
SPEC = re.compile(r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<cls>[A-Za-z_]\w*)$")
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")  # a record folder name on every file system; no "+" (schedules)


def is_spec(strategy: object) -> bool:
    """Whether ``strategy`` names a class in a module (``MODULE:CLASS``) rather than a registered name."""
    return isinstance(strategy, str) and ":" in strategy


def parse_spec(spec: str) -> tuple[str, str]:
    """(module, class) of ``MODULE:CLASS``; ValueError naming a malformed spec."""
    found = SPEC.match(spec.strip()) if isinstance(spec, str) else None
    if found is None:
        raise ValueError(f"bad strategy {spec!r}: a strategy of your own is named MODULE:CLASS, e.g. "
                         "my_masking:LongWordMasking (a dotted module importable from here, a class in it)")
    return found["module"], found["cls"]


def check_spec(spec: str) -> tuple[str, str]:
    """The cheap checks of a spec, before anything heavy is imported: its form, and that its module can be
    found on ``sys.path`` (found, not executed; a dotted module's parent packages are imported)."""
    module, cls = parse_spec(spec)
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError) as err:  # a parent package missing, or failing to import
        raise ValueError(f"bad strategy {spec!r}: module {module!r} cannot be found: {type(err).__name__}: {err}"
                         f"{_where()}") from None
    if found is None:
        raise ValueError(f"bad strategy {spec!r}: no module {module!r} importable{_where()}")
    return module, cls


def _where() -> str:
    return (f" (searched the current folder {os.getcwd()} when it is on sys.path, PYTHONPATH and the installed "
            "packages; run from the folder holding your file, or put it on PYTHONPATH)")


def load(spec: str) -> type:
    """The strategy class that ``MODULE:CLASS`` names, checked (:func:`check_class`) and registered under
    its ``name``; ValueError naming what was wrong (module, class, not a strategy, name, parameters)."""
    module_name, cls_name = check_spec(spec)
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # the user's module failed to import: say which and why, no traceback
        raise ValueError(f"bad strategy {spec!r}: importing module {module_name!r} failed: "
                         f"{type(err).__name__}: {err}") from None
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise ValueError(f"bad strategy {spec!r}: module {module_name!r} ({getattr(module, '__file__', '?')}) "
                         f"has no {cls_name!r}")
    check_class(cls, spec)
    register(cls, spec)
    export_import_path(module)
    return cls


def check_class(cls: object, spec: str) -> None:
    """ValueError unless ``cls`` is a usable strategy class: a MaskingStrategy subclass with a safe ``name``
    of its own and ``PARAMS`` that start with the base's ``p`` and ``corruption``."""
    # A subclass of MaskingStrategy imported its module when it was defined: without it in sys.modules nothing
    # is one, and the answer comes without importing torch (os:path is refused in a fraction of a second).
    base = sys.modules.get("typhoon.masking.base")
    if not (inspect.isclass(cls) and base is not None and issubclass(cls, base.MaskingStrategy)):
        raise ValueError(f"bad strategy {spec!r}: {cls!r} is not a masking strategy (a subclass of "
                         "typhoon.masking.base.MaskingStrategy)")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(f"bad strategy {spec!r}: class {cls.__name__} must declare its own `name`, a folder name "
                         f"of lower-case letters, digits, '_' and '-' (it names the run records), got {name!r}")
    if name in builtin_names() or name == "base":
        raise ValueError(f"bad strategy {spec!r}: its name {name!r} is a built-in strategy's; choose another")
    params = cls.PARAMS
    if not isinstance(params, tuple | list) or not all(isinstance(p, Param) for p in params):
        raise ValueError(f"bad strategy {spec!r}: {cls.__name__}.PARAMS must be a tuple of "
                         "typhoon.masking.params.Param")
    if tuple(params[:len(BASE_PARAMS)]) != BASE_PARAMS:
        raise ValueError(f"bad strategy {spec!r}: {cls.__name__}.PARAMS must start with the base's parameters: "
                         "PARAMS = (*BASE_PARAMS, Param(...), ...)")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"bad strategy {spec!r}: {cls.__name__}.PARAMS declares a name twice: {names}")
    if getattr(cls._select, "__qualname__", "").startswith("MaskingStrategy."):
        raise ValueError(f"bad strategy {spec!r}: {cls.__name__} does not implement _select")


def register(cls: type, spec: str) -> None:
    """Register ``cls`` under its name; ValueError if another class has it already."""
    known = PLUGIN_STRATEGIES.get(cls.name)
    if known is not None and known is not cls and source_of(known) != source_of(cls):
        raise ValueError(f"bad strategy {spec!r}: its name {cls.name!r} is taken by {source_of(known)}")
    PLUGIN_STRATEGIES[cls.name] = cls


def source_of(cls: type) -> str:
    """The spec that names ``cls``: ``module:Class``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def from_entry_point(name: str) -> type | None:
    """The strategy an installed package registers as ``name`` in :data:`ENTRY_POINT_GROUP` (loaded,
    checked, registered), or None where none does."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == name:
            return load(point.value.replace(" ", ""))
    return None


def known(strategy: str) -> str:
    """The registered name of ``strategy``: a built-in name or alias as it is, a spec loaded (:func:`load`)
    and replaced by its class's name, an unknown name looked up in the entry points. Unknown names are
    returned as they are (the registry's lookup refuses them, naming the choices)."""
    if is_spec(strategy):
        return load(strategy).name
    if strategy not in builtin_names() and strategy not in PLUGIN_STRATEGIES:
        found = from_entry_point(strategy)
        if found is not None:
            return found.name
    return strategy


def export_import_path(module) -> None:
    """Put the folder a plugin module was imported from on ``PYTHONPATH`` for this process's children:
    the notebook kernels of ``reproduce`` (which start in ``notebooks/``, not in the current folder) and
    local workers then import it as this process did."""
    file = getattr(module, "__file__", None)
    if not file:
        return
    root = Path(file).resolve().parent
    for _ in range(module.__name__.count(".") + (Path(file).name == "__init__.py")):
        root = root.parent
    current = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if str(root) not in current and str(root) not in site_folders():
        os.environ["PYTHONPATH"] = os.pathsep.join([*current, str(root)])


def site_folders() -> set[str]:
    """The installed packages' folders: every child process has them on its path already."""
    import site

    return {*site.getsitepackages(), site.getusersitepackages()}
