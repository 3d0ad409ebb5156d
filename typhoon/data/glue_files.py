"""GLUE data files: where a task's official TSV files are, their checksums, reading them exactly, and
fetching the tasks not bundled. (Tokenizing is :mod:`typhoon.data.tokenizing`, batching
:mod:`typhoon.data.batching`; a task of your own, declared in a profiles file, is read by
:mod:`typhoon.data.task_files`, and :func:`load_glue` and :func:`locate_glue` take it too.)

Where a task's files come from, in order (the first place that has the task's folder wins):
the ``data_dir`` argument, the ``TYPHOON_GLUE_DIR`` environment variable (a folder in the official
layout ``<dir>/<TASK>/{train,dev,test}.tsv``; set to no folder, it is refused, not passed over), the data bundled in this package (``glue_data/``:
CoLA and MRPC, byte-identical to the official release, see ``glue_data/SOURCES.md``), and only then
the hub (``datasets.load_dataset("nyu-mll/glue", ...)``), which needs a network.
``python -m typhoon data fetch TASK`` downloads any other task's official files into the same layout.

A task folder may carry a ``SHA256SUMS`` manifest (``sha256sum`` format; the bundle and ``data fetch``
write one). Every file read from such a folder is checked against it, so a changed or truncated file is
refused by name instead of silently changing the results.

The official files have quirks that must not be "fixed": MRPC headers start with a UTF-8 BOM and its
sentences contain bare ``"`` characters (so no CSV quoting is applied), CoLA train/dev have no header,
and CoLA dev has no trailing newline. Lines are therefore split on tabs by hand, which also lets every
error name the file and line.
"""


from __future__ import annotations

import os
import tempfile
import urllib.request
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from typhoon.atomic import atomic_write_text, staged_dir
from typhoon.data.task_files import read_task
from typhoon.declared import UserTask
from typhoon.names import TaskSpec, task_spec
from typhoon.paths import GLUE_DIR_ENV, file_sha256, glue_dir_from_env

if TYPE_CHECKING:
    import datasets



# The bundled official files live inside the package, so any install (editable, wheel, Docker) has them.
BUNDLED_GLUE_DIR = Path(__file__).resolve().parents[1] / "glue_data"


BUNDLED_TASKS = ("cola", "mrpc")


CHECKSUM_FILE = "SHA256SUMS"


HUB_DATASET = "nyu-mll/glue"


# Where download_glue_data.py (the GLUE authors' script) fetches each task's official zip.
OFFICIAL_ZIP_URL = "https://dl.fbaipublicfiles.com/glue/data/{}.zip"


def get_task(task: str) -> TaskSpec | UserTask:
    """A task's spec by its usual name, an alias or its GLUE folder name, case-insensitively (the table is
    :data:`typhoon.names.GLUE_TASKS`, torch-free, so that the command line checks a name at once), or a task
    declared in a profiles file of ``$TYPHOON_PROFILES`` (:func:`typhoon.names.task_spec`)."""
    return task_spec(task)


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


def _features(spec: TaskSpec | UserTask) -> datasets.Features:
    import datasets

    feats = {c: datasets.Value("string") for c in spec.normalized_text_columns}
    feats["label"] = datasets.ClassLabel(names=list(spec.label_names))
    feats["idx"] = datasets.Value("int32")
    return datasets.Features(feats)


@dataclass(frozen=True)
class GlueSource:
    """Where one task is read from: a local task folder (with its origin), or the hub (``folder`` None)."""

    origin: str  # "data_dir", "$TYPHOON_GLUE_DIR", "bundled" or "hub"; a declared task's: "declared in <file>"
    folder: Path | None

    def __str__(self) -> str:
        return f"hub: {HUB_DATASET}" if self.folder is None else f"{self.origin}: {self.folder}"


def _hub_switched_off() -> str | None:
    """The variable that keeps ``datasets`` off the hub, if one is set (the values huggingface_hub accepts)."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().upper() in {"1", "ON", "YES", "TRUE"}:
            return var
    return None


def _search_glue(spec: TaskSpec, data_dir) -> tuple[GlueSource | None, list[str]]:
    """The first place holding the task (the hub counts unless switched off), and a line per place tried."""
    env_value = glue_dir_from_env()  # set but no folder: refused, not passed over
    looked = []
    for origin, root in (("data_dir", data_dir), (f"${GLUE_DIR_ENV}", env_value), ("bundled", BUNDLED_GLUE_DIR)):
        if root is None:
            looked.append(f"{origin}: not given" if origin == "data_dir" else f"{origin}: not set")
            continue
        root = Path(root).expanduser()
        if (root / spec.folder).is_dir():
            return GlueSource(origin, root / spec.folder), looked
        if root.is_dir():
            looked.append(f"{origin}: {root} has no {spec.folder}/ folder")
        else:
            looked.append(f"{origin}: {root} is not a folder")
            warnings.warn(f"GLUE data folder {root} ({origin}) does not exist; looking further", stacklevel=3)
    switched_off = _hub_switched_off()
    if switched_off is None:
        return GlueSource("hub", None), looked
    looked.append(f"hub {HUB_DATASET}: switched off ({switched_off} is set)")
    return None, looked


def _not_found(spec: TaskSpec, looked: list[str]) -> FileNotFoundError:
    places = "".join(f"\n  - {line}" for line in looked)
    layout = f"or set {GLUE_DIR_ENV} to a folder holding {spec.folder}/train.tsv (the official GLUE layout)"
    fix = (f"python -m typhoon data fetch {spec.name}   (the official files, once; needs a network), {layout}"
           if spec.official_zip else f"reinstall the package (it bundles {spec.folder}), {layout}")
    return FileNotFoundError(f"GLUE data for {spec.name} not found. Looked in:{places}\nFix: {fix}")


def locate_glue(task: str, data_dir: str | os.PathLike | None = None) -> GlueSource:
    """Where :func:`load_glue` reads ``task`` from; FileNotFoundError (naming every place tried) if nowhere. A
    declared task's files are where its profiles file says: the folder of its train file."""
    spec = get_task(task)
    if isinstance(spec, UserTask):
        return GlueSource(f"declared in {spec.declared_in}", spec.files["train"].parent)
    source, looked = _search_glue(spec, data_dir)
    if source is None:
        raise _not_found(spec, looked)
    return source


def read_checksums(folder: Path) -> dict[str, str] | None:
    """A task folder's ``SHA256SUMS`` as {path relative to the folder: sha256}, or None if it has none."""
    path = Path(folder) / CHECKSUM_FILE
    if not path.is_file():
        return None
    entries = {}
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, _, name = line.partition(" ")
        name = name[1:] if name[:1] in " *" else name  # "<hash>  name" (text) or "<hash> *name" (binary)
        if len(digest) != 64 or not name or any(c not in "0123456789abcdef" for c in digest.lower()):
            raise ValueError(f"{path}, line {line_no}: not a sha256sum line: {line!r}")
        entries[name] = digest.lower()
    return entries


def write_checksums(folder: Path, names: Sequence[str]) -> None:
    """Write ``SHA256SUMS`` for ``names`` (paths relative to ``folder``), readable by ``sha256sum -c``."""
    atomic_write_text(Path(folder) / CHECKSUM_FILE,
                      "".join(f"{file_sha256(Path(folder) / name)}  {name}\n" for name in names))


def _restore_hint(source: GlueSource, spec: TaskSpec) -> str:
    if spec.name in BUNDLED_TASKS and source.folder == BUNDLED_GLUE_DIR / spec.folder:
        return f"restore the bundled file: git checkout -- typhoon/glue_data/{spec.folder} (or reinstall the package)"
    if spec.official_zip:
        return f"fetch it again: python -m typhoon data fetch {spec.name} --dir {source.folder.parent} --force"
    return "restore the official file"


def verify_glue_file(source: GlueSource, spec: TaskSpec, path: Path) -> str | None:
    """Refuse a file that differs from its folder's ``SHA256SUMS`` (ValueError naming it and the fix).

    A folder without a manifest is the user's own data: it is read, but for a CoLA/MRPC file that is
    not the official one a note is returned, since results from it will not match the published numbers.
    """
    name = path.relative_to(source.folder).as_posix()
    manifest = read_checksums(source.folder)
    if manifest is None and source.origin == "bundled":  # the bundle and `data fetch` always write one
        raise ValueError(f"{source.folder / CHECKSUM_FILE} is missing, so {path} cannot be checked; "
                         f"{_restore_hint(source, spec)}")
    if manifest is None:
        official = read_checksums(BUNDLED_GLUE_DIR / spec.folder) or {}
        if name in official and file_sha256(path) != official[name]:
            return (f"{path} is not the official GLUE file (its sha256 differs from "
                    f"{BUNDLED_GLUE_DIR / spec.folder / CHECKSUM_FILE}); results will not match the published numbers")
        return None
    if name not in manifest:
        raise ValueError(f"{path} is not listed in {source.folder / CHECKSUM_FILE}; {_restore_hint(source, spec)}")
    actual = file_sha256(path)
    if actual != manifest[name]:
        raise ValueError(
            f"{path} was changed or truncated: its sha256 is {actual} ({path.stat().st_size} bytes), "
            f"{source.folder / CHECKSUM_FILE} says {manifest[name]}; {_restore_hint(source, spec)}"
        )
    return None


def load_glue(task: str, data_dir: str | os.PathLike | None = None, *,
              declaration: Mapping | None = None) -> datasets.DatasetDict:
    """Load a GLUE classification task as a DatasetDict with splits train / validation / test.

    The files come from the first place that has the task (module docstring); files in a folder with a
    ``SHA256SUMS`` manifest are checked against it. Columns are normalized: ``sentence`` (or
    ``sentence1``/``sentence2``), ``label`` (GLUE's label order; -1 on the unlabelled test split) and ``idx``.
    A task declared in a profiles file has train and validation, read from its files
    (:func:`typhoon.data.task_files.read_task`; checked against ``declaration``, a run config's, where given).
    """
    import datasets  # here, not at the top: reading a file's rows or its checksum needs no Arrow

    spec = get_task(task)
    if isinstance(spec, UserTask):
        feats = _features(spec)
        return datasets.DatasetDict({name: datasets.Dataset.from_dict(cols, features=feats)
                                     for name, cols in read_task(spec, declaration).items()})
    source, looked = _search_glue(spec, data_dir)
    if source is None:
        raise _not_found(spec, looked)
    if source.folder is None:
        return _load_glue_from_hub(spec, looked)
    folder = source.folder
    if not (folder / "train.tsv").is_file():
        raise FileNotFoundError(
            f"GLUE data for {spec.name} not found: expected {folder / 'train.tsv'} ({source.origin}; "
            f"official layout <dir>/{spec.folder}/{{train,dev}}.tsv)"
        )
    files = {"train": folder / "train.tsv", "validation": folder / spec.dev_files[0]}
    if (folder / "test.tsv").is_file():
        files["test"] = folder / "test.tsv"
    # a missing dev file is reported by read_glue_split, naming it
    notes = [verify_glue_file(source, spec, path) for path in files.values() if path.is_file()]
    splits = {name: read_glue_split(spec, path, labelled=name != "test") for name, path in files.items()}
    for note in filter(None, notes):  # only for files that parsed: a broken one's error says enough
        warnings.warn(note, stacklevel=2)
    feats = _features(spec)
    test_feats = datasets.Features({**feats, "label": datasets.Value("int64")})
    return datasets.DatasetDict(
        {name: datasets.Dataset.from_dict(cols, features=test_feats if name == "test" else feats)
         for name, cols in splits.items()}
    )


def require_labelled_splits(dataset_dict: datasets.DatasetDict, task: str) -> None:
    """Refuse a task whose train or validation split is missing or empty (nothing to train or score)."""
    empty = [s for s in ("train", "validation") if s not in dataset_dict or len(dataset_dict[s]) == 0]
    if empty:
        raise ValueError(f"GLUE {task}: empty split(s) {empty}")


def _load_glue_from_hub(spec: TaskSpec, looked: list[str]) -> datasets.DatasetDict:
    import datasets

    try:
        raw = datasets.load_dataset(HUB_DATASET, spec.hub_config)
    except Exception as err:  # any network or hub failure: say where we looked and how to fix it
        raise _not_found(spec, [*looked, f"hub {HUB_DATASET}: {type(err).__name__}: {err}"]) from err
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


def default_fetch_dir() -> Path:
    """Where ``data fetch`` puts a task: ``$TYPHOON_GLUE_DIR`` if set, else beside the bundled tasks."""
    return Path(os.environ.get(GLUE_DIR_ENV) or BUNDLED_GLUE_DIR).expanduser()


def fetch_glue(task: str, dest: str | os.PathLike | None = None, *, url: str | None = None,
               force: bool = False, timeout_s: float = 60.0) -> Path:
    """Download a task's official GLUE zip into ``<dest>/<TASK>/`` with a ``SHA256SUMS`` manifest.

    The folder appears in one rename once every file is written and train/dev parse, so a failed
    download leaves nothing behind. Returns the task folder (untouched if it already holds the task,
    unless ``force``). ``url`` overrides the official address (a mirror, or a ``file://`` zip).
    """
    spec = get_task(task)
    if isinstance(spec, UserTask):
        raise ValueError(f"task {spec.name} is your own (declared in {spec.declared_in}): its files are there, "
                         "nothing to fetch")
    root = Path(dest).expanduser() if dest is not None else default_fetch_dir()
    folder = root / spec.folder
    if (folder / "train.tsv").is_file() and not force:
        return folder
    if url is None:
        if spec.official_zip is None:
            raise ValueError(f"GLUE {spec.name} has no official zip (GLUE builds it from the MSR corpus); "
                             f"the bundle carries it: {BUNDLED_GLUE_DIR / spec.folder}")
        url = OFFICIAL_ZIP_URL.format(spec.official_zip)
    with tempfile.TemporaryFile() as archive:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                while block := response.read(1 << 20):
                    archive.write(block)
        except OSError as err:  # URLError, timeouts, refused connections
            raise ConnectionError(f"could not download GLUE {spec.name} from {url}: {err}") from err
        with staged_dir(folder) as staging:  # published whole, or nothing left
            write_checksums(staging, _extract_task_files(archive, staging, url))
            read_glue_split(spec, staging / "train.tsv")  # a broken archive is refused before it is published
            read_glue_split(spec, staging / spec.dev_files[0])
    return folder


def _extract_task_files(archive, staging: Path, url: str) -> list[str]:
    """Copy the ``*.tsv`` files beside the archive's ``train.tsv`` into ``staging``; their names, sorted."""
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            train = [m for m in members if Path(m.filename).name == "train.tsv"]
            if len(train) != 1:
                raise ValueError(f"{url}: expected one train.tsv in the archive, found {len(train)}")
            task_dir = Path(train[0].filename).parent
            names = []
            for member in members:
                path = Path(member.filename)
                if path.parent == task_dir and path.suffix == ".tsv":
                    (staging / path.name).write_bytes(zf.read(member))
                    names.append(path.name)
    except zipfile.BadZipFile as err:
        raise ValueError(f"{url}: not a zip archive ({err})") from None
    return sorted(names)
