"""The one registry of the bundle's studies: which study a profile, a results folder or a command belongs to. The
engine (``runner/``), ``report/``, ``analysis/`` and the command line name no study; ``reproduce``, ``reanalyse``,
``results-readme`` and the command line's parser ask here. It imports every built-in study explicitly, so the
import check sees each tie; a study of your own is named ``MODULE:CLASS`` (a profile's ``study = ...``, or
``python -m typhoon study MODULE:CLASS``) and loaded as a strategy of your own is (docs/extending.md).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from typhoon.studies import grid, kl_gap, kl_original, schedules, sequential
from typhoon.studies.study import Study

#: The built-in studies by name (each its folder's STUDY).
STUDIES: dict[str, Study] = {study.name: study for study in (grid.STUDY, schedules.STUDY, sequential.STUDY,
                                                             kl_gap.STUDY, kl_original.STUDY)}


def study_named(name: str) -> Study:
    """A built-in study by name, or a study of your own by ``MODULE:CLASS`` (a :class:`Study` subclass, made with no
    arguments); ValueError naming the studies otherwise."""
    if ":" in name:
        return _user_study(name)
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; the bundle's studies: {', '.join(STUDIES)}, or MODULE:CLASS for "
                         "one of your own")
    return STUDIES[name]


def _user_study(spec: str) -> Study:
    """A study of your own: ``MODULE:CLASS`` (the module importable from here or on ``PYTHONPATH``)."""
    module_name, _, class_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)  # a user's module, not the package's own
    except ImportError as err:
        raise ValueError(f"study {spec!r}: cannot import {module_name!r} ({err}); put it on PYTHONPATH or in the "
                         "folder you run from") from None
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, Study)):
        raise ValueError(f"study {spec!r}: {module_name} has no Study subclass {class_name!r} "
                         "(class ... (typhoon.studies.Study))")
    return found()


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Every built-in study's own subcommands, each with only its own flags."""
    for study in STUDIES.values():
        study.add_commands(sub)


def study_of_profile(profile: str) -> Study:
    """The study a profile runs: the one its ``study`` names (``grid`` unless it says otherwise)."""
    from typhoon.profiles import get_profile

    return study_named(get_profile(profile).study)


def study_of_folder(out_dir: str | Path) -> Study:
    """The study whose results ``out_dir`` holds: the one its MANIFEST's profile names."""
    from typhoon.records import study_profile

    return study_of_profile(study_profile(Path(out_dir)))
