"""Fault injection for the reliability tests: crash or kill at a named stage of chosen runs.

Inactive unless ``TYPHOON_FAULT_INJECT`` holds a JSON object (or a list of them), e.g.
``{"stage": "record_write", "match": "typhoon/seed1", "action": "kill", "pid": "parent"}``:
at ``stage`` of every run whose record path contains ``match``, either raise ``InjectedFault``
(``"raise"``, the default) or SIGKILL process ``pid`` (a number, or ``"parent"``: the process that
started this one, i.e. the batch) and then this process (``"kill"``: a machine lost mid-write), or
raise the ``OSError`` a full disk gives (``"enospc"``, naming the path being written), raise
``KeyboardInterrupt`` (``"interrupt"``: what Ctrl-C or a SIGTERM gives a run), raise the
``torch.OutOfMemoryError`` a full GPU gives (``"oom"``, tried on a CPU as well), or sleep ``"seconds"``
(``"sleep"``: cells longer than they are, so that a job's walltime surely ends one mid-run).

``"once": "<folder>"`` makes a fault act only the first time a run reaches its stage (a marker file per run
and stage in that folder, created exclusively, so it holds across processes and machines that share the
folder): a cell that hangs on its first attempt and runs through on its retry.

Stages: ``train`` (phase 1 done), ``record_write`` (the record's files staged), and
``state_saved:<boundary>`` (a resume state just written: ``mlm``, ``ft1``, ``ft2``, ...;
:mod:`typhoon.training.resume`).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time

ENV = "TYPHOON_FAULT_INJECT"


class InjectedFault(RuntimeError):
    """The failure a test asked for."""


def maybe_inject(stage: str, record_path: str, path: str | os.PathLike | None = None) -> None:
    raw = os.environ.get(ENV)
    if not raw:
        return
    faults = json.loads(raw)
    for fault in faults if isinstance(faults, list) else [faults]:
        if fault.get("stage") != stage or fault.get("match", "") not in record_path:
            continue
        if fault.get("once") and not _first_time(fault["once"], stage, record_path):
            continue
        if fault.get("action") == "sleep":
            time.sleep(float(fault["seconds"]))
            continue
        if fault.get("action", "raise") == "kill":
            pid = fault.get("pid")
            if pid:
                os.kill(os.getppid() if pid == "parent" else int(pid), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.get("action") == "interrupt":
            raise KeyboardInterrupt(f"injected interrupt at {stage} of {record_path}")
        if fault.get("action") == "oom":
            import torch  # only a run reaches here, with torch loaded

            raise torch.OutOfMemoryError(f"CUDA out of memory (injected at {stage} of {record_path}). "
                                         "Tried to allocate 2.00 GiB")
        if fault.get("action") == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path or record_path))
        raise InjectedFault(f"injected fault at {stage} of {record_path}")


def _first_time(folder: str, stage: str, record_path: str) -> bool:
    """Whether this is the first time ``record_path`` reached ``stage`` (its marker in ``folder`` is new)."""
    os.makedirs(folder, exist_ok=True)
    marker = os.path.join(folder, f"{record_path.strip('/').replace('/', '.')}.{stage.replace(':', '-')}")
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True
