"""How the batch shares the machine among cells (fast unit checks; the end-to-end runs are in test_reproduce)."""

import json

from typhoon import batch
from typhoon.config import get_profile

CPU_CELL = get_profile("cpu").run_config(task="mrpc", strategy="random", seed=0)  # num_threads unset


def test_parallel_cpu_cells_share_the_cores(monkeypatch):
    monkeypatch.setattr(batch, "usable_cores", lambda: 2)
    assert batch.cell_threads(CPU_CELL, workers=2, gpus=[]) == 1
    assert batch.cell_threads(CPU_CELL, workers=3, gpus=[]) == 1  # never below one thread
    monkeypatch.setattr(batch, "usable_cores", lambda: 16)
    assert batch.cell_threads(CPU_CELL, workers=4, gpus=[]) == 4


def test_cells_keep_their_threads_when_alone_on_gpus_or_set(monkeypatch):
    monkeypatch.setattr(batch, "usable_cores", lambda: 2)
    assert batch.cell_threads(CPU_CELL, workers=1, gpus=[]) is None
    assert batch.cell_threads(CPU_CELL, workers=2, gpus=["cuda:0", "cuda:1"]) is None
    assert batch.cell_threads(CPU_CELL.replace(num_threads=2), workers=2, gpus=[]) is None


def test_cell_parameters_carry_threads_and_device_as_overrides(tmp_path):
    params = batch.cell_parameters(CPU_CELL, tmp_path, {"p": 0.2}, device="cuda:1", threads=1)
    assert json.loads(params["overrides"]) == {"p": 0.2, "device": "cuda:1", "num_threads": 1}
    assert json.loads(batch.cell_parameters(CPU_CELL, tmp_path, None, None)["overrides"]) == {}
    from typhoon.pipeline import config_from_parameters

    config = config_from_parameters(params["task"], params["backbone"], params["strategy"], params["seed"],
                                    params["profile"], params["schedule"], params["overrides"])
    assert config.num_threads == 1 and config.device == "cuda:1" and config.p == 0.2


class _Stop(Exception):
    pass


def test_reproduce_takes_the_profiles_workers_unless_told(monkeypatch, tmp_path):
    seen = []

    def fake_grid(configs, out_dir, nb_dir, workers, executor, overrides):
        seen.append(workers)
        raise _Stop

    monkeypatch.setattr(batch, "preflight", lambda configs: None)
    monkeypatch.setattr(batch, "run_grid", fake_grid)
    for workers in (None, 3):
        try:
            batch.reproduce("cpu", tmp_path, workers=workers, analysis=False)
        except _Stop:
            pass
    assert seen == [get_profile("cpu").workers, 3] and seen[0] == 2
    assert get_profile("smoke").workers == 1  # a profile without the key runs one cell at a time
