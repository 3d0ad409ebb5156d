"""Running the study: the grid of cells and its analysis notebooks, the time estimate, stopping and
resuming, cluster executors and the progress monitor."""
