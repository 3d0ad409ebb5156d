"""The committed reference runs (``results/<profile>/``): re-running the analysis on their committed
``results.csv`` and run records reproduces their committed tables exactly (statistics and budget spread),
and ``results.csv`` is what the records say. Skipped where no reference run is committed."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from notebook_here import run_notebook_here

from typhoon.profiles import get_profile
from typhoon.records import result_rows
from typhoon.runner import notebooks
from typhoon.studies.schedules import analysis as schedule_study
from typhoon.studies.sequential import decisive
from typhoon.studies.sequential import design as decisive_design

REFERENCES = sorted(p.parent for p in (REPO / "results").glob("*/results.csv"))
# The notebooks whose tables depend on the runs (40_mask_schedules is theory: its tables do not).
ANALYSIS = ("20_statistics.ipynb", "30_budget_spread.ipynb")
# Float rounding between CPUs (numpy's SIMD paths differ in the last bit) is all that may differ.
RTOL = 1e-12
# every test here checks a committed run, not the code (`make test-results`)
pytestmark = pytest.mark.results


@pytest.fixture(params=REFERENCES or [None], ids=lambda p: p.name if p else "none")
def reference(request):
    if request.param is None:
        pytest.skip("no reference run committed under results/ (python -m typhoon reproduce --profile P "
                    "--out results/P)")
    return request.param


def assert_same_table(got: pd.DataFrame, want: pd.DataFrame, name: str) -> None:
    assert list(got.columns) == list(want.columns) and got.shape == want.shape, name
    for column in want.columns:
        g, w = got[column], want[column]
        if pd.api.types.is_numeric_dtype(w) and pd.api.types.is_numeric_dtype(g):
            np.testing.assert_allclose(g.to_numpy(float), w.to_numpy(float), rtol=RTOL, atol=0, equal_nan=True,
                                       err_msg=f"{name}.{column}")
        else:
            assert g.fillna("").astype(str).tolist() == w.fillna("").astype(str).tolist(), f"{name}.{column}"


def test_results_csv_is_what_the_committed_records_say(reference):
    committed = pd.read_csv(reference / "results.csv")
    spec = get_profile(committed["profile"].iloc[0])
    if spec.design:  # a sequential study's table holds the seeds trained so far, not its whole cap
        rebuilt = decisive.results_table(decisive.grid_configs(spec), reference)
    else:
        grid, backbones = spec.grid(), set(committed["backbone"])
        if {c.backbone for c in grid} != backbones:  # a reference of another backbone than the profile's default
            grid = [c for b in sorted(backbones) for c in spec.grid({"backbone": b})]  # (results/cpu: minilm-l6)
        rebuilt = result_rows.collect_results(reference, grid)
    rebuilt = pd.read_csv(io.StringIO(rebuilt.to_csv(index=False)))  # the dtypes a CSV gives
    assert_same_table(rebuilt, committed, "results.csv")


def test_a_schedules_grids_comparison_is_what_its_results_say(reference, tmp_path):
    """stats/schedules_vs_fixed.csv (notebook 40's last section) recomputed from the committed results.csv
    under the profile's registered hypothesis."""
    if not schedule_study.is_schedule_study(reference):
        pytest.skip(f"{reference.name} is not a schedules grid")
    shutil.copy(reference / "results.csv", tmp_path / "results.csv")
    profile = pd.read_csv(tmp_path / "results.csv")["profile"].iloc[0]
    table, _ = schedule_study.study_of_folder(tmp_path, profile)
    spec = get_profile(profile)  # every registered comparison is in the table: each schedule but the reference
    assert len(table) == (len(spec.schedules) - 1) * len(spec.tasks) * len(spec.backbones) * len(spec.strategies)
    assert_same_table(schedule_study.read_table(tmp_path), schedule_study.read_table(reference), schedule_study.TABLE)


def test_rerunning_the_analysis_reproduces_the_committed_tables(reference, tmp_path):
    """Notebooks 20 and 30 run on a copy of the committed folder, in this process (tests/notebook_here.py:
    the tables they write are what is checked; the smoke run executes them in kernels)."""
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(reference / "results.csv", out / "results.csv")
    (out / "runs").symlink_to(reference / "runs", target_is_directory=True)  # records are only read
    profile = pd.read_csv(out / "results.csv")["profile"].iloc[0]
    spec = get_profile(profile)
    if spec.design:  # a sequential study: its tables are decisive.write_outputs' (notebook 50 shows them)
        decisive.write_outputs(decisive_design.study_design(spec), decisive.grid_configs(spec), out)
        for name in ("verdicts.csv", "history.csv", "seeds.csv", "boundaries.csv"):
            assert_same_table(pd.read_csv(out / "stats" / name), pd.read_csv(reference / "stats" / name), name)
        return
    for name in ANALYSIS:
        run_notebook_here(notebooks.notebooks_dir() / name, {"out_dir": str(out), "profile": profile})
    produced = sorted(p.name for p in (out / "stats").glob("*.csv"))
    assert {"summary.csv", "comparisons.csv", "budget_states.csv"} <= set(produced)
    for name in produced:
        assert (reference / "stats" / name).is_file(), f"the analysis makes stats/{name}; it is not committed"
        assert_same_table(pd.read_csv(out / "stats" / name), pd.read_csv(reference / "stats" / name), name)
