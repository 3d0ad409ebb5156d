"""Typhoon reproducibility bundle: which tokens to mask in masked language modelling."""

__version__ = "0.1.0"
