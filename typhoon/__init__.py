"""Typhoon reproducibility bundle: which tokens to mask in masked language modelling."""

from typhoon.training.progress_bars import quiet_tqdm_auto as _quiet_tqdm_auto

__version__ = "0.1.0"

_quiet_tqdm_auto()  # before a notebook imports datasets or transformers (see typhoon.training.progress_bars)
