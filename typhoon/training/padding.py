"""How training and evaluation batches are padded (torch-free: the estimate counts padded widths without torch)."""

from __future__ import annotations

PAD_MULTIPLE = 8  # batches padded to a multiple of 8: fewer distinct shapes, less kernel warm-up, better tiles


def padded_width(length: int) -> int:
    """The width of a batch whose longest row has ``length`` tokens (:func:`typhoon.data.collate`)."""
    return -(-length // PAD_MULTIPLE) * PAD_MULTIPLE
