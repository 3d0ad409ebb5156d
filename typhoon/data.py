"""GLUE data: read the official TSV files exactly, tokenize with word ids, pad batches dynamically.

Where the data comes from, in order: the ``data_dir`` argument, the ``TYPHOON_GLUE_DIR`` environment
variable (a folder in the official layout ``<dir>/<TASK>/{train,dev,test}.tsv``), and only then the
hub (``datasets.load_dataset("nyu-mll/glue", ...)``), which needs a network.

The official files have quirks that must not be "fixed": MRPC headers start with a UTF-8 BOM and its
sentences contain bare ``"`` characters (so no CSV quoting is applied), CoLA train/dev have no header,
and CoLA dev has no trailing newline. Lines are therefore split on tabs by hand, which also lets every
error name the file and line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import torch

GLUE_DIR_ENV = "TYPHOON_GLUE_DIR"


@dataclass(frozen=True)
class TaskSpec:
    """How one GLUE task's files are laid out and what its columns mean."""

    name: str  # the usual short name, e.g. "mrpc"
    folder: str  # the GLUE folder name, e.g. "MRPC"
    hub_config: str  # the config name of the hub's GLUE dataset
    text_columns: tuple[str, ...]  # file columns holding the text, in order
    label_column: str | int | None  # file column (name, or index for headerless files)
    label_names: tuple[str, ...]  # label order as GLUE (and the hub) number them
    metric: str  # the task's official primary metric
    has_header: bool = True
    n_columns: int | None = None  # required for headerless files
    dev_files: tuple[str, ...] = ("dev.tsv",)
    test_text_columns: tuple[str, ...] | None = None
    file_label_values: tuple[str, ...] = field(default=())  # label strings in the file, if not 0..k-1

    @property
    def is_pair(self) -> bool:
        return len(self.text_columns) == 2

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def normalized_text_columns(self) -> tuple[str, ...]:
        return ("sentence1", "sentence2") if self.is_pair else ("sentence",)


GLUE_TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in [
        TaskSpec("cola", "CoLA", "cola", (3,), 1, ("unacceptable", "acceptable"), "mcc",
                 has_header=False, n_columns=4, test_text_columns=("sentence",)),
        TaskSpec("sst2", "SST-2", "sst2", ("sentence",), "label", ("negative", "positive"), "accuracy"),
        TaskSpec("mrpc", "MRPC", "mrpc", ("#1 String", "#2 String"), "Quality",
                 ("not_equivalent", "equivalent"), "f1"),
        TaskSpec("qqp", "QQP", "qqp", ("question1", "question2"), "is_duplicate",
                 ("not_duplicate", "duplicate"), "f1"),
        TaskSpec("mnli", "MNLI", "mnli", ("sentence1", "sentence2"), "gold_label",
                 ("entailment", "neutral", "contradiction"), "accuracy",
                 dev_files=("dev_matched.tsv",), file_label_values=("entailment", "neutral", "contradiction")),
        TaskSpec("qnli", "QNLI", "qnli", ("question", "sentence"), "label",
                 ("entailment", "not_entailment"), "accuracy",
                 file_label_values=("entailment", "not_entailment")),
        TaskSpec("rte", "RTE", "rte", ("sentence1", "sentence2"), "label",
                 ("entailment", "not_entailment"), "accuracy",
                 file_label_values=("entailment", "not_entailment")),
        TaskSpec("wnli", "WNLI", "wnli", ("sentence1", "sentence2"), "label",
                 ("not_entailment", "entailment"), "accuracy"),
    ]
}

_ALIASES = {"sst-2": "sst2", "mnli-m": "mnli", "mnli_matched": "mnli"}


def get_task(task: str) -> TaskSpec:
    """Look a task up by its usual name or GLUE folder name, case-insensitively."""
    key = str(task).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in GLUE_TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; choose one of {sorted(GLUE_TASKS)}")
    return GLUE_TASKS[key]


# --------------------------------------------------------------------------------------------------
# Reading the official files


def _read_tsv_rows(path: Path) -> list[tuple[int, list[str]]]:
    """Split a TSV file into [(line_number, fields)] without any quote handling."""
    text = path.read_text(encoding="utf-8-sig")  # strips MRPC's BOM
    lines = text.split("\n")
    if lines and lines[-1] == "":  # a trailing newline is optional (CoLA dev has none)
        lines.pop()
    return [(i + 1, line.rstrip("\r").split("\t")) for i, line in enumerate(lines)]


def read_glue_split(spec: TaskSpec, path: Path, *, labelled: bool = True) -> dict[str, list]:
    """Read one official split file into normalized columns (text, ``label``, ``idx``).

    Raises ValueError naming the file and line for a wrong column count or a bad label.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GLUE file not found: {path}")
    rows = _read_tsv_rows(path)
    if not spec.has_header and labelled:
        n_columns = spec.n_columns
        text_idx = list(spec.text_columns)
        label_idx = spec.label_column
    else:
        if not rows:
            raise ValueError(f"{path}: empty file (expected a header line)")
        _, header = rows.pop(0)
        n_columns = len(header)
        text_names = spec.test_text_columns if (not labelled and spec.test_text_columns) else spec.text_columns
        try:
            text_idx = [header.index(c) for c in text_names]
            label_idx = header.index(spec.label_column) if labelled else None
        except ValueError as err:
            raise ValueError(f"{path}: header {header} lacks a column the {spec.name} task needs ({err})") from None
    if not rows:
        raise ValueError(f"{path}: no data rows (empty split)")

    texts: list[list[str]] = [[] for _ in text_idx]
    labels: list[int] = []
    label_lookup = {v: i for i, v in enumerate(spec.file_label_values)} if spec.file_label_values else None
    for line_no, fields in rows:
        if len(fields) != n_columns:
            raise ValueError(
                f"{path}, line {line_no}: expected {n_columns} tab-separated columns, found {len(fields)}"
            )
        for column, i in zip(texts, text_idx, strict=True):
            column.append(fields[i])
        if labelled:
            raw = fields[label_idx].strip()
            if label_lookup is not None:
                label = label_lookup.get(raw)
            else:
                label = int(raw) if raw.isdigit() else None
            if label is None or not 0 <= label < spec.num_labels:
                raise ValueError(
                    f"{path}, line {line_no}: bad label {raw!r} for {spec.name} "
                    f"(expected one of {list(spec.file_label_values) or list(range(spec.num_labels))})"
                )
            labels.append(label)
    columns: dict[str, list] = dict(zip(spec.normalized_text_columns, texts, strict=True))
    columns["label"] = labels if labelled else [-1] * len(rows)
    columns["idx"] = list(range(len(rows)))
    return columns


def _features(spec: TaskSpec) -> datasets.Features:
    feats = {c: datasets.Value("string") for c in spec.normalized_text_columns}
    feats["label"] = datasets.ClassLabel(names=list(spec.label_names))
    feats["idx"] = datasets.Value("int32")
    return datasets.Features(feats)


def resolve_glue_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The local GLUE folder to use: the argument, else ``$TYPHOON_GLUE_DIR``, else None."""
    chosen = data_dir if data_dir is not None else os.environ.get(GLUE_DIR_ENV)
    return Path(chosen).expanduser() if chosen else None


def load_glue(task: str, data_dir: str | os.PathLike | None = None) -> datasets.DatasetDict:
    """Load a GLUE classification task as a DatasetDict with splits train / validation / test.

    Columns are normalized: ``sentence`` (or ``sentence1``/``sentence2``), ``label`` (GLUE's label
    order; -1 on the unlabelled test split) and ``idx``.
    """
    spec = get_task(task)
    root = resolve_glue_dir(data_dir)
    if root is not None:
        folder = root / spec.folder
        if not (folder / "train.tsv").is_file():
            raise FileNotFoundError(
                f"GLUE data for {spec.name} not found: expected {folder / 'train.tsv'} "
                f"(official layout <dir>/{spec.folder}/{{train,dev}}.tsv; set {GLUE_DIR_ENV} or pass data_dir)"
            )
        splits = {
            "train": read_glue_split(spec, folder / "train.tsv"),
            "validation": read_glue_split(spec, folder / spec.dev_files[0]),
        }
        if (folder / "test.tsv").is_file():
            splits["test"] = read_glue_split(spec, folder / "test.tsv", labelled=False)
        feats = _features(spec)
        test_feats = datasets.Features({**feats, "label": datasets.Value("int64")})
        return datasets.DatasetDict(
            {name: datasets.Dataset.from_dict(cols, features=test_feats if name == "test" else feats)
             for name, cols in splits.items()}
        )
    return _load_glue_from_hub(spec)


def require_labelled_splits(dataset_dict: datasets.DatasetDict, task: str) -> None:
    """Refuse a task whose train or validation split is missing or empty (nothing to train or score)."""
    empty = [s for s in ("train", "validation") if s not in dataset_dict or len(dataset_dict[s]) == 0]
    if empty:
        raise ValueError(f"GLUE {task}: empty split(s) {empty}")


def _load_glue_from_hub(spec: TaskSpec) -> datasets.DatasetDict:
    where = f"no data_dir argument and ${GLUE_DIR_ENV} is not set"
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        raise FileNotFoundError(
            f"GLUE {spec.name}: {where}, and the hub is disabled (offline). "
            f"Point {GLUE_DIR_ENV} at a folder with the official GLUE TSVs (<dir>/{spec.folder}/train.tsv)."
        )
    try:
        raw = datasets.load_dataset("nyu-mll/glue", spec.hub_config)
    except Exception as err:  # any network or hub failure: say where we looked and how to fix it
        raise FileNotFoundError(
            f"GLUE {spec.name}: {where}, and loading it from the hub failed ({type(err).__name__}: {err}). "
            f"Point {GLUE_DIR_ENV} at a folder with the official GLUE TSVs (<dir>/{spec.folder}/train.tsv)."
        ) from err
    if spec.name == "mnli":
        raw = datasets.DatasetDict(
            train=raw["train"], validation=raw["validation_matched"], test=raw["test_matched"]
        )
    hub_text = {"question1": "sentence1", "question2": "sentence2", "question": "sentence1"}
    keep = [*spec.normalized_text_columns, "label", "idx"]
    out = {}
    for split, ds in raw.items():
        ds = ds.rename_columns({k: v for k, v in hub_text.items() if k in ds.column_names})
        if spec.name == "qnli":
            ds = ds.rename_column("sentence", "sentence2") if "sentence2" not in ds.column_names else ds
        out[split] = ds.select_columns(keep)
    return datasets.DatasetDict(out)


# --------------------------------------------------------------------------------------------------
# Tokenization with word ids


def text_pairs(dataset: datasets.Dataset, spec: TaskSpec) -> tuple[list[str], list[str] | None]:
    """The text column(s) of a split as python lists (second is None for single-sentence tasks)."""
    cols = spec.normalized_text_columns
    first = dataset[cols[0]]
    return list(first), (list(dataset[cols[1]]) if spec.is_pair else None)


def tokenize_glue(
    dataset_dict: datasets.DatasetDict, tokenizer, task: str, max_length: int = 128
) -> datasets.DatasetDict:
    """Tokenize every split, keeping word ids (for whole-word and span masking) and lengths.

    Adds ``input_ids``, ``token_type_ids`` (if the tokenizer makes them), ``special_tokens_mask``,
    ``word_ids`` (-1 at special tokens; the second sentence continues the numbering of the first)
    and ``length``. Nothing is padded here: batches are padded dynamically by :func:`collate`.
    """
    spec = get_task(task)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("tokenize_glue needs a fast tokenizer (it reads word ids from the encodings)")

    def encode(batch):
        cols = spec.normalized_text_columns
        enc = tokenizer(
            *(batch[c] for c in cols), truncation=True, max_length=max_length,
            return_special_tokens_mask=True,
        )
        word_ids = []
        for i in range(len(enc["input_ids"])):
            words, sequences = enc.word_ids(i), enc.sequence_ids(i)
            first_words = max((w for w, s in zip(words, sequences, strict=True) if s == 0 and w is not None),
                              default=-1) + 1
            word_ids.append([
                -1 if w is None else (w + first_words if s == 1 else w)
                for w, s in zip(words, sequences, strict=True)
            ])
        out = {k: enc[k] for k in ("input_ids", "token_type_ids", "special_tokens_mask") if k in enc}
        out["word_ids"] = word_ids
        out["length"] = [len(ids) for ids in enc["input_ids"]]
        return out

    return dataset_dict.map(encode, batched=True, desc=f"tokenize {spec.name}")


def collate(features: Sequence[dict], pad_token_id: int, pad_to_multiple_of: int = 1) -> dict[str, torch.Tensor]:
    """Pad a list of tokenized examples to the longest one (see docs/CONTRACTS.md for the keys).

    ``pad_to_multiple_of`` rounds the width up, which bounds the number of distinct batch shapes (each
    new shape costs a kernel warm-up in bf16 on CPU) and suits matrix units' tile sizes.
    """
    if not features:
        raise ValueError("collate needs at least one example")
    width = max(len(f["input_ids"]) for f in features)
    width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    n = len(features)

    def padded(key: str, fill: int, dtype=torch.long) -> torch.Tensor:
        out = torch.full((n, width), fill, dtype=dtype)
        for row, f in enumerate(features):
            values = f[key]
            out[row, : len(values)] = torch.as_tensor(values, dtype=dtype)
        return out

    lengths = torch.as_tensor([len(f["input_ids"]) for f in features])
    batch = {
        "input_ids": padded("input_ids", pad_token_id),
        "attention_mask": (torch.arange(width) < lengths[:, None]).long(),
        "special_tokens_mask": padded("special_tokens_mask", 1, dtype=torch.bool),  # padding counts as special
        "word_ids": padded("word_ids", -1),
    }
    if "token_type_ids" in features[0]:
        batch["token_type_ids"] = padded("token_type_ids", 0)
    if "label" in features[0]:
        batch["labels"] = torch.as_tensor([f["label"] for f in features], dtype=torch.long)
    return batch


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, rng: np.random.Generator | None, mega_factor: int = 50
) -> list[np.ndarray]:
    """Index batches of similar length, so dynamic padding wastes little compute.

    The data is shuffled, cut into "mega-batches" of ``mega_factor * batch_size`` examples, each
    sorted by length and split into batches; batch order is shuffled again. With ``rng=None`` the
    order is deterministic (sorted within fixed mega-batches), which is what evaluation wants.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    lengths = np.asarray(lengths)
    order = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
    mega = batch_size * mega_factor
    batches = []
    for start in range(0, len(order), mega):
        chunk = order[start : start + mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches.extend(chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size))
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def token_counts(input_ids: Sequence[Sequence[int]], special_tokens_mask: Sequence[Sequence[int]],
                 vocab_size: int) -> np.ndarray:
    """Counts f_v of every non-special token type in a tokenized corpus (Typhoon's calibration needs them)."""
    ids = np.fromiter((t for row in input_ids for t in row), dtype=np.int64)
    special = np.fromiter((s for row in special_tokens_mask for s in row), dtype=bool)
    return np.bincount(ids[~special], minlength=vocab_size).astype(np.int64)
