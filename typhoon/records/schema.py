"""The tables' schema: the keys that name a run and the columns of results.csv, of the grid's status
table and of a record's mlm_loss.csv."""

from __future__ import annotations

# results.csv and the grid's status table are tidy: every grid axis is its own column, so a run is named by
# GRID_KEYS there (strategy = the masking strategy alone, schedule = its mask schedule).
GRID_KEYS = ["task", "backbone", "strategy", "schedule", "seed"]

# The statistics compare arms: a strategy under a schedule, named by typhoon.masking.params.arm_label (the run's
# record folder name, RunConfig.label). In their tables (stats/*.csv, typhoon.analysis.run_summary.arms) a run is
# named by RUN_KEYS, whose strategy is that arm.
RUN_KEYS = ["task", "backbone", "strategy", "seed"]

# Typhoon-family runs: how their masking was calibrated, from which loss's saliency, and how far their final
# masking distribution is from uniform masking (budget moved = TV, KL in nats/token: metrics["masking"]).
# Empty for the other strategies.
MASKING_COLUMNS = ["calibration", "saliency", "budget_moved", "kl_to_uniform"]


RESULT_COLUMNS = [
    *GRID_KEYS, "profile", "status", "primary_metric", "primary_value",
    "majority_value", "dev_accuracy", "dev_f1", "dev_mcc", *MASKING_COLUMNS, "mlm_wall_s", "ft_wall_s", "wall_s",
    "mlm_tokens_per_s", "ft_tokens_per_s", "device", "precision", "record_path", "error",
    "task_head_accuracy", "task_head_learned",  # task-loss saliency only: its task model's check (task_saliency)
    "mlm_full_mask_loss",  # the MLM's dev loss with every token masked (training.dev_losses.full_mask_dev_loss; schedule_study)
]


STATUS_COLUMNS = [*GRID_KEYS, "status", "error", "seconds", "record_path", "resumed"]


LOSS_COLUMNS = ["step", "epoch", "split", "loss"]  # mlm_loss.csv
