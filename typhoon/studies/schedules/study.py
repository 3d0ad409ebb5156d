"""The schedules study to the registry: a grid of mask schedules (run as the grid study runs), whose Summary and
results-page block compare each schedule with the fixed rate (:mod:`typhoon.studies.schedules.pages`)."""

from __future__ import annotations

from pathlib import Path

from typhoon.studies.grid.study import Grid


class Schedules(Grid):
    name = "schedules"
    summary = "a grid of mask schedules, each against the fixed rate: the dev metric and the full-mask loss"

    def pages(self, out_dir: Path | None = None):
        from typhoon.studies.schedules.pages import PAGES

        return PAGES


STUDY = Schedules()
