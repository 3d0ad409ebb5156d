"""The training stage: one cell of the grid end to end (MLM adaptation, fine-tuning, evaluation)."""
