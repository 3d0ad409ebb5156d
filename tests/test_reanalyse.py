"""``reanalyse``: which records a committed run's notebooks are made from, and bad folders refused."""

import time
from pathlib import Path

import pandas as pd

from typhoon.cli import main
from typhoon.records import study_profile
from typhoon.runner.notebooks import pair_notebooks
from typhoon.studies.grid.reanalyse import recorded_configs

SMOKE = Path(__file__).resolve().parents[1] / "results" / "smoke"


def test_the_cells_are_the_records_own_configs_in_results_order():
    configs = recorded_configs(SMOKE)
    listed = pd.read_csv(SMOKE / "results.csv")["record_path"].tolist()
    assert [c.relative_dir().as_posix() for c in configs] == listed
    assert study_profile(SMOKE) == "smoke"
    # one walkthrough per backbone x task, in the order the grid has them
    assert [name for _, _, name in pair_notebooks(configs)] == [
        "10_walkthrough-mrpc-tiny-random.ipynb", "10_walkthrough-mrpc-minilm-l6.ipynb"]


def test_a_folder_that_is_not_a_run_is_refused_with_exit_2_writing_nothing(tmp_path, capsys):
    started = time.perf_counter()
    assert main(["reanalyse", str(tmp_path)]) == 2
    assert "no MANIFEST.json" in capsys.readouterr().err and time.perf_counter() - started < 2
    assert list(tmp_path.iterdir()) == []


def test_a_sequential_study_without_records_is_refused_before_anything_is_removed(tmp_path, capsys):
    (tmp_path / "MANIFEST.json").write_text('{"profile": "decisive-mlm"}')
    stale = tmp_path / "notebooks" / "runs" / "mrpc" / "10_run.ipynb"  # what the old engine wrote per cell
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    started = time.perf_counter()
    assert main(["reanalyse", str(tmp_path)]) == 2
    assert "no finished record of profile decisive-mlm" in capsys.readouterr().err
    assert time.perf_counter() - started < 2 and stale.is_file()
