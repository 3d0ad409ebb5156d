"""Adapted backbones: an embedded checkpoint plus a shipped file of the tensors that MLM adaptation changed.

``minilm-l6-mlm`` is the embedded MiniLM-L6 with its encoder layers and a masked-LM head trained on
offline English prose (``scripts/train_mlm_backbone.py``; the card beside the weights says the corpus,
recipe, held-out loss and machine). Only the changed tensors ship, in
``typhoon/models/weights/<name>.safetensors``; the loader checks the file's SHA-256 against the one
declared here and refuses a missing or altered file, naming it and the expected hash. It never falls
back to a fresh head.

Torch-free at import (the CLI reads the names); :func:`adapted_state` imports safetensors when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typhoon.paths import file_sha256

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


class AdaptedWeightsError(ValueError):
    """A shipped weights file is missing or is not the one the package declares."""


@dataclass(frozen=True)
class AdaptedSpec:
    name: str
    base: str  # the registry name of the checkpoint the tensors apply to
    sha256: str  # of the safetensors file, as shipped (its description: typhoon.names.BACKBONES)

    @property
    def weights(self) -> Path:
        return WEIGHTS_DIR / f"{self.name}.safetensors"

    @property
    def card(self) -> Path:
        return WEIGHTS_DIR / f"{self.name}.json"


ADAPTED: dict[str, AdaptedSpec] = {
    "minilm-l6-mlm": AdaptedSpec(
        "minilm-l6-mlm", "minilm-l6",
        sha256="f954f5936efbe6d861dfbb5f9b28fb31ee7ade0a9c382dd65bef54282cd1a0d8",
    ),
}


def trained_tensor_names(num_layers: int, top_layers: int) -> list[str]:
    """The BertForMaskedLM parameter names an adaptation of the top ``top_layers`` layers trains: those
    layers, the head's transform and its output bias (the decoder matrix is tied to the frozen word
    embeddings)."""
    if not 1 <= top_layers <= num_layers:
        raise ValueError(f"top_layers must lie in [1, {num_layers}], got {top_layers}")
    layer_parts = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                   "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"]
    names = [f"bert.encoder.layer.{i}.{part}.{kind}" for i in range(num_layers - top_layers, num_layers)
             for part in layer_parts for kind in ("weight", "bias")]
    head = ["cls.predictions.bias", "cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
            "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias"]
    return names + head


def check_weights(spec: AdaptedSpec) -> Path:
    """The weights file of ``spec``, or AdaptedWeightsError naming the file and the expected hash."""
    path = spec.weights
    if not spec.sha256:
        raise AdaptedWeightsError(f"backbone {spec.name!r} has no shipped weights yet (no hash declared in "
                                  f"typhoon/models/adapted.py); make them with scripts/train_mlm_backbone.py")
    if not path.is_file():
        raise AdaptedWeightsError(f"backbone {spec.name!r}: weights file {path} is missing; expected a file "
                                  f"with sha256 {spec.sha256} (reinstall the package, or rebuild it with "
                                  f"scripts/train_mlm_backbone.py)")
    actual = file_sha256(path)
    if actual != spec.sha256:
        raise AdaptedWeightsError(f"backbone {spec.name!r}: weights file {path} has sha256 {actual}, expected "
                                  f"{spec.sha256}: the file is altered or from another build; reinstall the package")
    return path


def adapted_state(spec: AdaptedSpec) -> dict:
    """The shipped tensors of ``spec`` (names as in the stock *ForMaskedLM), hash-checked."""
    from safetensors.torch import load_file

    return load_file(str(check_weights(spec)))
