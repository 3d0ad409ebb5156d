"""What a study is to the registry (:mod:`typhoon.studies.registry`) and to the command line: a :class:`Study`.

A study is one folder, ``typhoon/studies/<name>/``: its design (what it registers), its policy of the one study
loop (:class:`typhoon.runner.policy.StudyPolicy`: its cells, its next look, its finish), its cells, its analysis,
its tables, its report section and its README answer. The engine (``runner/``), ``report/``, ``analysis/`` and the
command line name no study: they ask the registry, which maps a profile, a results folder or a command to its
study. A study of your own is a :class:`Study` in a module of yours (docs/extending.md), found as a strategy of
your own is: ``MODULE:CLASS``.

Light (no torch, pandas or the runner's workers at import): the command line builds its parser from the studies.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typhoon.profiles import Profile
    from typhoon.report import StudyPages
    from typhoon.runner import StudyPolicy


class Study:
    """A study of the bundle (see the module docstring).

    ``name``: what profiles (``study = "<name>"``) and the registry call it; ``summary``: one line for ``--help``.
    A study that profiles run (``reproduce --profile P``) makes its policy from the profile (:meth:`policy`); one
    with commands of its own adds them (:meth:`add_commands`), each with only its own flags."""

    name = "study"
    summary = ""

    def add_commands(self, sub: argparse._SubParsersAction) -> None:
        """Add the study's own subcommands to the command line (none by default): each sets ``func`` (what runs)
        and, where it checks its input before any work, ``checks`` (called with the parsed arguments; what it
        returns is the command's ``args.checked``)."""

    def policy(self, spec: Profile, configs: list, **options) -> StudyPolicy:
        """The policy of the loop that runs ``spec``'s cells (``configs``: every cell resolved once). ``options``:
        reproduce's (analysis, reuse, reuse_from, allow_mixed_precision, estimate)."""
        raise ValueError(f"the study {self.name!r} is not run by a profile: see `python -m typhoon --help`")

    def check_options(self, options) -> None:
        """ValueError naming each ``reproduce`` flag this study cannot honour (``options``: the
        :class:`typhoon.studies.profile_study.ReproduceOptions`), before any work; the grid honours them all."""

    def update_answer(self, readme: str | Path | None = None, check: bool = False) -> bool | None:
        """Rewrite the study's answer in the README (``results-readme --answer``); whether it changed (``check``:
        write nothing), None for a study with no answer there."""
        return None

    def pages(self, out_dir: Path) -> StudyPages | None:
        """What the study puts in its report's Summary and on the results page (None: no page)."""
        return None

    def reanalyse(self, out_dir: Path) -> Path:
        """The study's notebooks and report again from its records, training nothing; the report's path."""
        raise ValueError(f"the study {self.name!r} has no notebooks to run again")
