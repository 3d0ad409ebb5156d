"""The training stage: one cell of the grid end to end (:mod:`.run`), and the one step of each kind that
both a run and the grid estimate take (:mod:`.step`)."""
