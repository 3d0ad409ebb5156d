"""Typhoon reproducibility bundle: which tokens to mask in masked language modelling."""

import sys as _sys

__version__ = "0.1.0"

# Before a notebook imports datasets or transformers (see typhoon.training.progress_bars). Only a Jupyter
# kernel, which has IPython loaded, needs it: the command line skips importing tqdm (up to a second at
# start-up, on a busy machine), so that bad input is answered at once.
if "IPython" in _sys.modules:
    from typhoon.training.progress_bars import quiet_tqdm_auto as _quiet_tqdm_auto

    _quiet_tqdm_auto()
