"""Fault injection for the reliability tests: crash or kill at a named stage of a chosen run.

Inactive unless ``TYPHOON_FAULT_INJECT`` holds a JSON object, e.g.
``{"stage": "record_write", "match": "typhoon/seed1", "action": "kill", "pid": 1234}``:
at ``stage`` of every run whose record path contains ``match``, either raise (``"raise"``) or
SIGKILL process ``pid`` and then this process (``"kill"``: a machine lost mid-write).
"""

from __future__ import annotations

import json
import os
import signal

ENV = "TYPHOON_FAULT_INJECT"


class InjectedFault(RuntimeError):
    """The failure a test asked for."""


def maybe_inject(stage: str, record_path: str) -> None:
    raw = os.environ.get(ENV)
    if not raw:
        return
    fault = json.loads(raw)
    if fault.get("stage") != stage or fault.get("match", "") not in record_path:
        return
    if fault.get("action") == "kill":
        if fault.get("pid"):
            os.kill(int(fault["pid"]), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    raise InjectedFault(f"injected fault at {stage} of {record_path}")
