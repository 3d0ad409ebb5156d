"""Training: the one step of each kind that both a run and the grid estimate take."""
