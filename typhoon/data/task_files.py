"""A task of your own: reading the train and dev files a profiles file declares (``[tasks.<name>]``,
:mod:`typhoon.declared`) into the columns a GLUE split has (``sentence`` or ``sentence1``/``sentence2``, ``label``,
``idx``), and checking them against what a run's config says it read.

A file is read as bytes once: its sha256 is that of the bytes parsed, so a run's record names the data it trained
on. CSV is read with the usual quoting, TSV as the GLUE files are (split on tabs, no quoting: a bare ``"`` is
text), JSON lines one object a line; blank lines are no example. Every error names the file and the line.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping

from typhoon.declared import UserTask, records

SPLITS = {"train": "train", "validation": "dev"}  # the DatasetDict's split: the declaration's file


def read_task_file(task: UserTask, file: str) -> tuple[dict[str, list], str]:
    """One declared file (``"train"`` or ``"dev"``) as normalized columns, and the sha256 of the bytes read.
    ValueError naming the file and line for a missing column, a text that is no string or a label that is none
    of the declared values."""
    path = task.files[file]
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text ({err})") from None
    columns = [*task.text_columns, task.label_column]
    label_of = {value: i for i, value in enumerate(task.label_names)}
    texts: list[list[str]] = [[] for _ in task.text_columns]
    labels: list[int] = []
    try:
        rows = list(records(io.StringIO(text, newline=""), task.format))
    except ValueError as err:
        raise ValueError(f"{path}, {err}") from None
    if task.format != "jsonl" and task.header and rows:
        _, header = rows.pop(0)
        missing = [c for c in columns if c not in header]
        if missing:
            raise ValueError(f"{path}: its header {header} has no column {missing[0]!r} (task {task.name})")
        width, columns = len(header), [header.index(c) for c in columns]
    else:
        width = len(rows[0][1]) if rows and task.format != "jsonl" else None
        if width is not None and max(columns) >= width:
            raise ValueError(f"{path}: its first line has {width} columns, no column {max(columns)} (numbered from 0)")
    if not rows:
        raise ValueError(f"{path}: no examples")
    for line_no, record in rows:
        if width is not None and len(record) != width:
            raise ValueError(f"{path}, line {line_no}: {len(record)} columns, the file's first line has {width}")
        missing = [c for c in columns if c not in record] if isinstance(record, dict) else []
        if missing:
            raise ValueError(f"{path}, line {line_no}: no {missing[0]!r} (task {task.name})")
        *text_values, raw = (record[c] for c in columns)
        for column, value in zip(texts, text_values, strict=True):
            if not isinstance(value, str):
                raise ValueError(f"{path}, line {line_no}: a text that is no string: {value!r}")
            column.append(value)
        label = label_of.get(str(raw).strip()) if isinstance(raw, str | int) and not isinstance(raw, bool) else None
        if label is None:
            raise ValueError(f"{path}, line {line_no}: label {raw!r} is none of the task's {list(task.label_names)}")
        labels.append(label)
    return ({**dict(zip(task.normalized_text_columns, texts, strict=True)), "label": labels,
             "idx": list(range(len(labels)))}, hashlib.sha256(data).hexdigest())


def read_task(task: UserTask, declaration: Mapping | None = None) -> dict[str, dict[str, list]]:
    """The train and validation columns of a declared task. With ``declaration`` (a run config's
    ``task_declaration``: what was declared when the run was planned), ValueError unless the files and the
    declaration are still those: a run's record must say what it read."""
    splits, sha256 = {}, {}
    for split, file in SPLITS.items():
        splits[split], sha256[file] = read_task_file(task, file)
    if declaration:
        now = task.declaration(sha256)
        changed = [key for key in sorted({*now, *declaration}) if now.get(key) != declaration.get(key)]
        if changed:
            what = ", ".join(f"{file} {task.files[file]}" for file in SPLITS.values()
                             if now["sha256"].get(file) != declaration.get("sha256", {}).get(file)) or \
                f"its declaration's {[key for key in changed if key != 'sha256']}"
            raise ValueError(f"task {task.name} ({task.declared_in}) changed since this run was planned: {what}; "
                             "run the command again to train on it as it is now")
    return splits
