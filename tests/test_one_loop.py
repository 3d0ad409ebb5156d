"""Every study through the one study loop (typhoon.runner.study.run_study): the longest cells first, a KL study's
cells on any executor giving the same bytes, its committed states found complete, and the curve's bad input refused
at once with nothing written."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import REPO
from inline_executor import InlineExecutor

from typhoon import cli
from typhoon.profiles import get_profile, resolve
from typhoon.runner import study
from typhoon.runner.cells import Cell
from typhoon.studies.kl_original import policy as kl_studies
from typhoon.studies.kl_original import runs as kl_runs


def test_the_longest_cells_go_first_by_their_estimate():
    configs = get_profile("smoke").grid()[:3]
    cells = [Cell(config, seconds=s) for config, s in zip(configs, (5.0, 30.0, 12.0), strict=True)]
    assert [cell.seconds for cell in study.longest_first(cells)] == [30.0, 12.0, 5.0]


def test_without_an_estimate_the_larger_encoder_goes_first():
    """The smoke grid lists its one MiniLM-L6 cell last, after six tiny-random ones: handed out in that order, one
    worker runs it alone at the end. MiniLM-L6 has 6 layers of 384 (21M matrix-product parameters); tiny-random 2
    of 32."""
    cells = [Cell(config) for config in get_profile("smoke").grid()]
    assert cells[-1].config.backbone == "minilm-l6"
    ordered = study.longest_first(cells)
    assert ordered[0].config.backbone == "minilm-l6"
    assert [cell.path for cell in ordered[1:]] == [cell.path for cell in cells[:-1]]  # ties keep the grid's order


def tiny_curve_config(task: str, seed: int, curve: str = "all", rehearse: int | None = None):
    return resolve("smoke", {"task": task, "backbone": "tiny-random", "strategy": "typhoon_2023", "seed": seed},
                   {"mlm_epochs": 3, "max_train_examples": 48, "max_eval_examples": 16, "p": 0.3,
                    "corruption": "mask_only", "num_threads": 1})


@pytest.mark.slow
def test_a_curve_gives_the_same_bytes_on_the_local_pool_and_inline(tmp_path, monkeypatch):
    """Two epochs of a (tiny) curve run as cells of the loop: in worker processes, and one after the other in this
    process. Each epoch goes on from the resume state the one before left; the files are the same bytes."""
    monkeypatch.setattr(kl_studies, "curve_config", tiny_curve_config)
    outputs = {where: tmp_path / where / "curve" / "mrpc" / "seed0" for where in ("pool", "inline")}
    # the command as a user types it: the local pool of worker processes; a curve too short for its tables is fine
    assert cli.main(["kl-original", "curve", "--tasks", "mrpc", "--seeds", "0", "--epochs", "2", "--workers", "1",
                     "--out", str(tmp_path / "pool"), "--checkpoints", str(tmp_path / "checkpoints-pool")]) == 0
    policy = kl_studies.KlOriginalCurve(tmp_path / "checkpoints-inline", 2, tasks=("mrpc",), seeds=(0,))
    summary = study.run_study(policy, tmp_path / "inline", workers=1, executor=InlineExecutor())
    assert summary.ok and list(summary.cells["record_path"]) == ["curve/mrpc/seed0"]  # a row per curve run
    assert json.loads((outputs["pool"] / "run.json").read_text())["epochs_reached"] == 2
    for name in ("epochs.csv", "trace.csv", "mlm_loss.csv", "epoch1/masking_state.npz", "epoch2/masking_state.npz"):
        assert (outputs["pool"] / name).read_bytes() == (outputs["inline"] / name).read_bytes(), name


def test_the_committed_row_states_are_found_complete(tmp_path):
    """A state written before RunConfig had its newer fields (batch_order, specials) is the same run: the loop
    trains nothing for it."""
    committed = REPO / "results" / "kl_original" / "states" / "all" / "mrpc" / "seed0"
    target = tmp_path / "states" / "all" / "mrpc" / "seed0"
    shutil.copytree(committed, target)
    policy = kl_studies.KlOriginalRows(["all"], ("mrpc",), (0,))
    assert policy.next_look(tmp_path, None, None).cells == []
    assert "0 to run, 1 complete already" in policy.describe(tmp_path)


def curve_folder_at(out: Path, epochs: int, note_config=None, checkpoints: Path | None = None) -> Path:
    folder = out / kl_runs.curve_folder("mrpc", 0)
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"epochs_reached": epochs}))
    if note_config is not None:
        note = kl_runs.state_note_path(kl_runs.state_path(checkpoints, "mrpc", 0))
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(json.dumps({"record_path": str(folder), "epoch": epochs, "config": note_config}))
    return folder


def refused(argv: list[str], capsys) -> str:
    started = time.perf_counter()
    assert cli.main(argv) == 2
    assert time.perf_counter() - started < 2.0
    return capsys.readouterr().err


def test_a_curve_asked_for_fewer_epochs_than_it_has_is_refused(tmp_path, capsys):
    curve_folder_at(tmp_path, 5)
    before = sorted(tmp_path.rglob("*"))
    err = refused(["kl-original", "curve", "--tasks", "mrpc", "--seeds", "0", "--epochs", "3", "--out", str(tmp_path),
                   "--checkpoints", str(tmp_path / "ck")], capsys)
    assert "--epochs 3: the curve run mrpc/seed0 has 5 epochs already" in err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


@pytest.mark.parametrize("epochs, said", [("0", "--epochs 0: a curve runs to at least 1 MLM epoch"),
                                           ("-3", "--epochs must be an integer >= 0, got -3")])
def test_a_curve_of_no_epochs_is_refused_before_its_runs_are_read(tmp_path, capsys, epochs, said):
    err = refused(["kl-original", "curve", "--epochs", epochs, "--out", str(tmp_path / "study")], capsys)
    assert said in err and not (tmp_path / "study").exists()


def test_a_row_whose_states_were_trained_under_another_definition_is_refused(tmp_path, capsys):
    """The committed states of row 'p' (trained when the row was registered) pass; one whose stored config has
    another p and EMA start is refused with the fields named, and nothing is trained or written."""
    committed = REPO / "results" / "kl_original" / "states" / "p" / "mrpc"
    shutil.copytree(committed, tmp_path / "states" / "p" / "mrpc")
    kl_runs.check_row_states(tmp_path, ["p"], ("mrpc",))  # as registered: no error
    run_file = tmp_path / "states" / "p" / "mrpc" / "seed1" / "run.json"
    stored = json.loads(run_file.read_text())
    stored["config"].update(p=0.2, ema_start="zeros")
    run_file.write_text(json.dumps(stored))
    before = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")}
    err = refused(["kl-original", "rows", "--row", "p", "--tasks", "mrpc", "--out", str(tmp_path)], capsys)
    assert "row 'p': the state" in err and "seed1 was trained under another definition (differs in ema_start, p)" in err
    assert {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*")} == before


def test_a_checkpoint_folder_of_another_run_is_refused(tmp_path, capsys):
    checkpoints = tmp_path / "ck"
    other = kl_runs.curve_config("mrpc", 0).replace(seed=7).to_dict()
    curve_folder_at(tmp_path / "study", 4, note_config=other, checkpoints=checkpoints)
    before = sorted(tmp_path.rglob("*"))
    err = refused(["kl-original", "curve", "--tasks", "mrpc", "--seeds", "0", "--epochs", "10", "--out",
                   str(tmp_path / "study"), "--checkpoints", str(checkpoints)], capsys)
    assert "belongs to another run (differs in seed)" in err
    err = refused(["kl-original", "curve", "--tasks", "mrpc", "--seeds", "0", "--epochs", "10", "--out",
                   str(tmp_path / "study"), "--checkpoints", str(tmp_path / "empty")], capsys)
    assert "no resume state of the curve run mrpc/seed0 (4 epochs" in err
    assert sorted(tmp_path.rglob("*")) == before


def test_a_kl_study_takes_only_where_its_cells_run(tmp_path, capsys):
    err = refused(["kl-original", "rows", "--out", str(tmp_path / "s"), "--set", "p=0.2"], capsys)
    assert "--set p: the study's design fixes what its runs compute" in err and "device, num_threads" in err
    err = refused(["kl-gap", "--out", str(tmp_path / "g"), "--set", "device=gpu"], capsys)
    assert "device must be one of" in err and "cuda:N" in err
    assert not (tmp_path / "s").exists() and not (tmp_path / "g").exists()
