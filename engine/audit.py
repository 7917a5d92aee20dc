"""Audit log: one JSON line per job, appended to a per-user file, so a studio can answer who made which synthetic
face, when, from which source identity, on which plate, with which settings and models.

Set $FACE_FUSION_AUDIT_LOG to a path (e.g. a shared folder) to collect it elsewhere, or to "off" to disable it.
Writing the log never fails a job: a log that cannot be written is reported as a warning.
"""

from __future__ import annotations

import datetime
import getpass
import json
import os
import socket
from pathlib import Path
from typing import Any

from engine import __version__
from engine.io.files import open_regular
from engine.models.catalogue import default_models_dir

ENV_AUDIT_LOG = "FACE_FUSION_AUDIT_LOG"


def audit_path() -> Path | None:
    value = os.environ.get(ENV_AUDIT_LOG, "")
    if value.strip().lower() == "off":
        return None
    return Path(value).expanduser() if value else default_models_dir().parent / "audit.jsonl"


def record(entry: dict[str, Any]) -> str | None:
    """Append ``entry`` (plus who, where and when). Returns a warning message when the log can't be written."""
    path = audit_path()
    if path is None:
        return None
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    line = json.dumps({"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                       "user": user, "host": socket.gethostname(), "pid": os.getpid(),
                       "engine_version": __version__, **entry}, sort_keys=True) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_regular(str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # a FIFO would hang the job
        try:
            os.write(fd, line.encode())  # one write per line: O_APPEND keeps concurrent writers' lines whole
        finally:
            os.close(fd)
    except OSError as exc:
        return f"the audit log {path} cannot be written ({exc.strerror}); set ${ENV_AUDIT_LOG} to a writable file"
    return None
