"""The grid study to the registry: a profile's grid of cells (one look), its walkthrough and analysis notebooks and
its report, whose Summary checks the paper's claims (:mod:`typhoon.studies.grid.pages`). Light: what runs is
imported when it runs."""

from __future__ import annotations

from pathlib import Path

from typhoon.studies.study import Study


class Grid(Study):
    name = "grid"
    summary = "a profile's grid, then its walkthroughs, analysis notebooks and report (the paper's claims checked)"

    def pages(self, out_dir: Path | None = None):
        from typhoon.studies.grid.pages import PAGES

        return PAGES

    def policy(self, spec, configs: list, **options):
        from typhoon.studies.grid.policy import FixedGrid

        return FixedGrid(spec, configs, self.pages(), **options)

    def reanalyse(self, out_dir: Path) -> Path:
        from typhoon.profiles import get_profile
        from typhoon.records import study_profile
        from typhoon.studies.grid.reanalyse import reanalyse_grid

        return reanalyse_grid(Path(out_dir), get_profile(study_profile(Path(out_dir))), self.pages(out_dir))


STUDY = Grid()
