"""The KL studies' runs as configs and folders: each cause's, row's, curve run's and fine-tuned cell's config
(the ``cpu`` profile's cell with the design's change), where its output goes, and what the command line checks of
a curve before anything runs. Light (no pandas, no torch): a curve asked for fewer epochs than it has, or given
another run's checkpoints, is refused at once.
"""

from __future__ import annotations

import json
from pathlib import Path

from typhoon.analysis.kl.gap_causes import RUN_FILE, Cause
from typhoon.analysis.kl.original_design import (
    ALL_2023,
    BACKBONE,
    CURVE_EPOCHS,
    FINETUNE_SETTINGS,
    PROFILE,
    SEEDS,
    TASKS,
    row_named,
)
from typhoon.config import RunConfig
from typhoon.profiles import resolve

KL_GAP_BACKBONE = "minilm-l6"  # the kl-gap baseline: the cpu profile's fresh-head cell
KL_GAP_SEEDS = (0, 1, 2)  # the kl-gap study's registered seeds, per task of TASKS


def cause_config(cause: Cause, task: str, seed: int) -> RunConfig:
    """The Typhoon cell of the cpu profile for ``task`` and ``seed``, with the cause's change."""
    return resolve(PROFILE, {"task": task, "backbone": KL_GAP_BACKBONE, "strategy": "typhoon", "seed": seed},
                   cause.overrides)


def row_config(row: str, task: str, seed: int) -> RunConfig:
    """The cpu profile's Typhoon cell on minilm-l6-mlm for ``task`` and ``seed``, with ``row``'s change."""
    overrides = dict(row_named(row).overrides)
    cell = {"task": task, "backbone": BACKBONE, "strategy": overrides.pop("strategy", "typhoon"), "seed": seed}
    return resolve(PROFILE, cell, overrides)


def curve_config(task: str, seed: int) -> RunConfig:
    overrides = dict(ALL_2023)
    cell = {"task": task, "backbone": BACKBONE, "strategy": overrides.pop("strategy"), "seed": seed}
    return resolve(PROFILE, cell, {**overrides, "mlm_epochs": CURVE_EPOCHS[task]})


def finetune_config(strategy: str, task: str, seed: int) -> RunConfig:
    return resolve(PROFILE, {"task": task, "backbone": BACKBONE, "strategy": strategy, "seed": seed},
                   dict(FINETUNE_SETTINGS))


def state_dir(out: Path, name: str, task: str, seed: int) -> Path:
    return Path(out) / state_folder(name, task, seed)


def state_folder(name: str, task: str, seed: int) -> str:
    return f"states/{name}/{task}/seed{seed}"


def curve_folder(task: str, seed: int) -> str:
    """A curve run's folder, relative to the study's."""
    return f"curve/{task}/seed{seed}"


def epochs_reached(folder: Path) -> int:
    """How many MLM epochs the curve run in ``folder`` has written (its ``run.json`` is written last)."""
    run_file = Path(folder) / RUN_FILE
    return json.loads(run_file.read_text())["epochs_reached"] if run_file.is_file() else 0


def state_path(checkpoints: Path, task: str, seed: int) -> Path:
    """A curve run's resume state in the checkpoint folder."""
    return Path(checkpoints) / f"{task}-seed{seed}.resume.pt"


def state_note_path(state: Path) -> Path:
    """The small file beside a curve run's resume state naming its run and epoch."""
    return Path(state).with_name(Path(state).name + ".json")


def check_curve(out: Path, checkpoints: Path, epochs: int, tasks=TASKS, seeds=SEEDS) -> None:
    """Refuse, before anything is written, a curve asked for fewer epochs than a run has, and a checkpoint folder
    that does not hold each started run's resume state (or holds another run's): ValueError naming it."""
    for task in tasks:
        for seed in seeds:
            folder, reached = Path(out) / curve_folder(task, seed), epochs_reached(Path(out) / curve_folder(task, seed))
            if reached > epochs:
                raise ValueError(f"--epochs {epochs}: the curve run {task}/seed{seed} has {reached} epochs already "
                                 f"({folder}); ask for at least {reached}")
            if reached == 0 or reached >= min(epochs, CURVE_EPOCHS[task]):
                continue
            note = state_note_path(state_path(checkpoints, task, seed))
            if not note.is_file():
                raise ValueError(f"--checkpoints {checkpoints}: no resume state of the curve run {task}/seed{seed} "
                                 f"({reached} epochs in {folder}); name the folder that holds it, or remove {folder} "
                                 "to start that run over")
            saved = json.loads(note.read_text())
            differ = config_differences(saved["config"], curve_config(task, seed))
            if differ or saved["epoch"] != reached:
                raise ValueError(f"--checkpoints {checkpoints}: the resume state of {task}/seed{seed} belongs to "
                                 + (f"another run (differs in {', '.join(differ)})" if differ else
                                    f"epoch {saved['epoch']}, its folder is at epoch {reached}")
                                 + f": name the folder of this run's states, or remove {folder} to start it over")


def check_row_states(out: Path, rows, tasks=TASKS, seeds=SEEDS) -> None:
    """Refuse, before anything is written, a row whose states in ``out`` were trained under another definition
    than the registered one: a row is registered before its first state, so a changed row would silently put new
    states beside (or over) states of the old one. ValueError naming the state and the fields that differ."""
    for row in rows:
        for task in tasks:
            for seed in seeds:
                run_file = state_dir(out, row, task, seed) / RUN_FILE
                if not run_file.is_file():
                    continue
                differ = config_differences(json.loads(run_file.read_text())["config"], row_config(row, task, seed))
                if differ:
                    raise ValueError(f"row '{row}': the state {run_file.parent} was trained under another definition "
                                     f"(differs in {', '.join(differ)}): a row is registered before its states and "
                                     "keeps its definition; register the change as a new row, or use another --out")


def config_differences(saved: dict, expected: RunConfig) -> list[str]:
    """The fields in which a stored run (``saved``, a config as a record stores it) differs from ``expected`` (its
    identity: where it ran does not count; a field added since takes its default)."""
    found, wanted = RunConfig.from_dict(saved).identity(), expected.identity()
    return sorted(k for k in set(found) | set(wanted) if found.get(k) != wanted.get(k))
