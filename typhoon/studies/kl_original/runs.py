"""The kl-original study's runs as configs and folders: each row's, curve run's and fine-tuned cell's config (the
``cpu`` profile's cell with the design's change), where its output goes, and what the command line checks of a
curve or a row before anything runs. Light (no pandas, no torch): a curve asked for fewer epochs than it has, or given
another run's checkpoints, is refused at once.
"""

from __future__ import annotations

import json
from pathlib import Path

from typhoon.config import RunConfig
from typhoon.profiles import resolve
from typhoon.studies.kl_gap.design import RUN_FILE, state_dir
from typhoon.studies.kl_original.design import (
    BACKBONE,
    CURVE_EPOCHS,
    CURVES,
    FINETUNE_SETTINGS,
    PROFILE,
    SEEDS,
    TASKS,
    row_named,
)


def row_config(row: str, task: str, seed: int) -> RunConfig:
    """The cpu profile's Typhoon cell on minilm-l6-mlm for ``task`` and ``seed``, with ``row``'s change."""
    overrides = dict(row_named(row).overrides)
    cell = {"task": task, "backbone": BACKBONE, "strategy": overrides.pop("strategy", "typhoon"), "seed": seed}
    return resolve(PROFILE, cell, overrides)


def curve_config(task: str, seed: int, curve: str = "all", rehearse: int | None = None) -> RunConfig:
    """A run of ``curve`` (:data:`~typhoon.studies.kl_original.design.CURVES`): its row's config over the planned
    MLM epochs. ``rehearse``: the same on that many training and dev examples, to try the machinery (never the
    study's run: its config says so, and the study's tables refuse it)."""
    overrides = dict(row_named(CURVES[curve].row).overrides)
    cell = {"task": task, "backbone": BACKBONE, "strategy": overrides.pop("strategy"), "seed": seed}
    if rehearse is not None:
        overrides.update(max_train_examples=rehearse, max_eval_examples=rehearse)
    return resolve(PROFILE, cell, {**overrides, "mlm_epochs": CURVE_EPOCHS[task]})


def finetune_config(strategy: str, task: str, seed: int) -> RunConfig:
    return resolve(PROFILE, {"task": task, "backbone": BACKBONE, "strategy": strategy, "seed": seed},
                   dict(FINETUNE_SETTINGS))


def curve_folder(task: str, seed: int, curve: str = "all") -> str:
    """A curve run's folder, relative to the study's."""
    return f"{CURVES[curve].folder}/{task}/seed{seed}"


def epochs_reached(folder: Path) -> int:
    """How many MLM epochs the curve run in ``folder`` has written (its ``run.json`` is written last)."""
    run_file = Path(folder) / RUN_FILE
    return json.loads(run_file.read_text())["epochs_reached"] if run_file.is_file() else 0


def state_path(checkpoints: Path, task: str, seed: int, curve: str = "all") -> Path:
    """A curve run's resume state in the checkpoint folder."""
    return Path(checkpoints) / CURVES[curve].state_name(task, seed)


def state_note_path(state: Path) -> Path:
    """The small file beside a curve run's resume state naming its run and epoch."""
    return Path(state).with_name(Path(state).name + ".json")


def check_curve(out: Path, checkpoints: Path, epochs: int, tasks=TASKS, seeds=SEEDS, curve: str = "all",
                device: str = "auto", rehearse: int | None = None) -> None:
    """Refuse, before anything is written, what the registered design does not allow -- an epoch past the plan, a
    curve registered on a GPU run elsewhere, a rehearsal in the study's folder -- a curve asked for fewer epochs
    than a run has, and a checkpoint folder that does not hold each started run's resume state (or holds another
    run's): ValueError naming it and what is allowed. ``device``: where the cells run (``--set device=``)."""
    plan = max(CURVE_EPOCHS[task] for task in tasks)
    if epochs > plan:
        raise ValueError(f"--epochs {epochs} is past the registered plan: the curve runs "
                         + ", ".join(f"{task} to {CURVE_EPOCHS[task]}" for task in tasks)
                         + f" MLM epochs; ask for at most {plan} (each run stops at its own plan)")
    registered = CURVES[curve].device
    if registered and not str(device).startswith(registered) and rehearse is None:
        raise ValueError(f"the curve '{curve}' is registered in the numerics of a {registered} device: run it with "
                         f"--set device={registered} (curves: "
                         + ", ".join(f"'{c.name}' {c.device or 'any device'}" for c in CURVES.values()) + ")")
    if rehearse is not None and (Path(out) / "states").is_dir():
        raise ValueError(f"--rehearse: {out} holds the study's states; a rehearsal writes into a folder of its own")
    for task in tasks:
        for seed in seeds:
            folder = Path(out) / curve_folder(task, seed, curve)
            reached = epochs_reached(folder)
            if reached > epochs:
                raise ValueError(f"--epochs {epochs}: the curve run {task}/seed{seed} has {reached} epochs already "
                                 f"({folder}); ask for at least {reached}")
            if reached == 0 or reached >= min(epochs, CURVE_EPOCHS[task]):
                continue
            note = state_note_path(state_path(checkpoints, task, seed, curve))
            if not note.is_file():
                raise ValueError(f"--checkpoints {checkpoints}: no resume state of the curve run {task}/seed{seed} "
                                 f"({reached} epochs in {folder}); name the folder that holds it, or remove {folder} "
                                 "to start that run over")
            saved = json.loads(note.read_text())
            differ = config_differences(saved["config"], curve_config(task, seed, curve, rehearse))
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


def check_curve_runs(out: Path) -> None:
    """Refuse, before a table is written, a curve run in ``out`` whose config is not its curve's registered one (a
    rehearsal's, or another study's): ValueError naming the run and the fields that differ."""
    for curve in CURVES.values():
        for run_file in sorted(Path(out).glob(f"{curve.folder}/*/seed*/{RUN_FILE}")):
            folder = run_file.parent
            task, seed = folder.parent.name, int(folder.name.removeprefix("seed"))
            differ = config_differences(json.loads(run_file.read_text())["config"], curve_config(task, seed, curve.name))
            if differ:
                raise ValueError(f"{folder}: not a run of the registered curve '{curve.name}' (differs in "
                                 f"{', '.join(differ)}): a rehearsal's or another study's; the study's tables read "
                                 f"only its registered runs: move it out of {out}")


def config_differences(saved: dict, expected: RunConfig) -> list[str]:
    """The fields in which a stored run (``saved``, a config as a record stores it) differs from ``expected`` (its
    identity: where it ran does not count; a field added since takes its default)."""
    found, wanted = RunConfig.from_dict(saved).identity(), expected.identity()
    return sorted(k for k in set(found) | set(wanted) if found.get(k) != wanted.get(k))
