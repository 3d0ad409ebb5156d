"""What a run leaves on disk: its record and lock, the results table, reuse of equal records, the numerics
it ran in and the output folder's manifest."""
