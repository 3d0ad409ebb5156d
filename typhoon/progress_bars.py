"""Progress bars that behave in a terminal and in a notebook alike.

In a terminal: tqdm's text bar on stderr. In a Jupyter kernel (JupyterLab, or papermill executing a
notebook): the same text bar, but shown as one output that is replaced in place (an IPython display
handle) at most once a second. So an executed notebook stores one line per bar -- its last state --
instead of every frame on stderr, and no ``IProgress not found`` warning appears: ``tqdm.auto`` wants
ipywidgets in a kernel, which the bundle does not need (and whose widgets a static copy cannot show).
"""

from __future__ import annotations

import io
import sys
import warnings
from collections.abc import Iterable

from tqdm.std import tqdm

NOTEBOOK_INTERVAL_S = 1.0  # redraws of a bar in a notebook: each one is a message to the front end


def in_notebook_kernel() -> bool:
    """True inside a Jupyter kernel (where stderr is the kernel's stream, not a terminal)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class DisplayLine(io.TextIOBase):
    """A file for tqdm that shows only the latest line it was given, in one notebook output.

    tqdm redraws a bar by writing ``"\\r" + bar``; the text after the last carriage return is the bar's
    current state. Blank writes (tqdm clearing a bar that does not stay) keep the last state shown.
    """

    def __init__(self):
        super().__init__()
        self.handle = None

    def write(self, text: str) -> int:
        line = text.replace("\n", "\r").split("\r")
        line = next((part for part in reversed(line) if part.strip()), "")
        if line:
            from IPython.display import Pretty, display

            if self.handle is None:
                self.handle = display(Pretty(line), display_id=True)
            else:
                self.handle.update(Pretty(line))
        return len(text)

    def flush(self) -> None:
        pass


def progress_bar(iterable: Iterable, desc: str, enabled: bool = True, **kwargs) -> tqdm:
    """A tqdm bar over ``iterable`` labelled ``desc``: text on stderr in a terminal, one in-place line
    in a notebook (see the module doc); ``enabled=False`` shows nothing."""
    if enabled and in_notebook_kernel():
        kwargs = {"mininterval": NOTEBOOK_INTERVAL_S, **kwargs, "file": DisplayLine(), "leave": True}
    return tqdm(iterable, desc=desc, disable=not enabled, **kwargs)


def quiet_tqdm_auto() -> None:
    """In a notebook kernel, import ``tqdm.auto`` once with its "IProgress not found" warning silenced.

    The libraries the bundle uses (datasets, transformers, huggingface_hub) import ``tqdm.auto``, which
    warns in a kernel without ipywidgets -- with the kernel's path in the message, in every executed
    notebook. The bundle shows no widget bars (:func:`progress_bar` needs none), so the warning is only
    noise. Called when ``typhoon`` is imported; a notebook imports ``typhoon`` before those libraries.
    """
    if "tqdm.auto" in sys.modules or not in_notebook_kernel():
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import tqdm.auto  # noqa: F401


def disable_library_bars() -> None:
    """Turn off the Hugging Face libraries' own bars (e.g. datasets' "tokenize" maps) and transformers' warnings,
    in the bundle's own processes only: its command line, workers and notebooks call this (importing the
    package changes nothing). In a notebook the bars would store a frame per update and say nothing a reader
    needs; the warnings are those of the bundle's own choices (a stock model's fresh head)."""
    import datasets
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging

    datasets.disable_progress_bars()
    disable_progress_bars()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
