"""Typhoon reproducibility bundle: which tokens to mask in masked language modelling."""

import importlib as _importlib
import sys as _sys
from collections.abc import Iterable as _Iterable

__version__ = "0.1.0"


def lazy_face(package: str, homes: dict[str, str], namespaces: _Iterable[str] = ()):
    """The ``__getattr__`` and ``__dir__`` (PEP 562) of a stage's face, ``typhoon/<stage>/__init__.py``.

    Each name in ``homes`` is read from its module of the stage (``homes[name]``) when another module
    first asks for it; each of ``namespaces`` is a module of the stage that other stages may use whole
    (``plugins.load``). A face that imported its modules eagerly would make the light ones pay for the heavy
    (``typhoon.cli`` imports ``records.locks``; ``records.run_record`` imports pandas). Nothing is cached in
    the face: the name is looked up in its module each time, so a test that patches it there is seen by
    every importer, and undone with it.
    """
    namespaces = frozenset(namespaces)

    def __getattr__(name: str):
        if name in namespaces:
            return _importlib.import_module(f"{package}.{name}")
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(_importlib.import_module(f"{package}.{home}"), name)

    def __dir__() -> list[str]:
        return sorted({*vars(_sys.modules[package]), *homes, *namespaces})

    return __getattr__, __dir__


# Before a notebook imports datasets or transformers (see typhoon.progress_bars). Only a Jupyter
# kernel, which has IPython loaded, needs it: the command line skips importing tqdm (up to a second at
# start-up, on a busy machine), so that bad input is answered at once.
if "IPython" in _sys.modules:
    from typhoon.progress_bars import quiet_tqdm_auto as _quiet_tqdm_auto

    _quiet_tqdm_auto()
