"""Audit log: JSON lines appended to a per-user file, so a studio can answer who made which synthetic face, when,
from which source identity, on which plate, with which settings, models, consent and watermark.

Tamper-evident: each line carries ``prev`` (the previous line's hash) and ``hash`` (sha256 of the line without
it), written under an exclusive lock on the log so concurrent engines and farm workers keep one chain. A render
writes a start line (its hash goes into every EXR it writes) and a closing line naming it; ``python -m engine
audit verify`` checks both (engine/audit_chain.py). Lines of older versions, without hashes, stay valid as a prefix.

Set $FACE_FUSION_AUDIT_LOG to a path (e.g. a shared folder) to collect it elsewhere, or to "off" to disable it.
Writing the log never fails a job: a log that cannot be written is reported as a warning.
"""

from __future__ import annotations

import datetime
import fcntl
import getpass
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from engine import __version__
from engine.io.files import open_regular
from engine.models.catalogue import default_models_dir

ENV_AUDIT_LOG = "FACE_FUSION_AUDIT_LOG"
TAIL = 1 << 20  # bytes read back to find the last line (a line is a few kB)


def audit_path() -> Path | None:
    value = os.environ.get(ENV_AUDIT_LOG, "")
    if value.strip().lower() == "off":
        return None
    return Path(value).expanduser() if value else default_models_dir().parent / "audit.jsonl"


def line_hash(fields: dict[str, Any]) -> str:
    """The hash of a line: its fields (``prev`` included, ``hash`` left out) as canonical JSON."""
    body = {k: v for k, v in fields.items() if k != "hash"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def link_of(raw: bytes) -> str:
    """What the next line's ``prev`` must be: the line's hash, or for a legacy line the sha256 of its bytes."""
    try:
        fields = json.loads(raw)
    except ValueError:
        fields = None
    if isinstance(fields, dict) and isinstance(fields.get("hash"), str):
        return fields["hash"]
    return "legacy:" + hashlib.sha256(raw.rstrip(b"\n")).hexdigest()


def _last_line(fd: int) -> bytes | None:
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0:
        return None
    start = max(0, end - TAIL)
    data = os.pread(fd, end - start, start).rstrip(b"\n")
    return data.rsplit(b"\n", 1)[-1]


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"


def append(entry: dict[str, Any]) -> tuple[str | None, str | None]:
    """Append ``entry`` (plus who, where, when and the chain). Returns (the line's hash, a warning message)."""
    path = audit_path()
    if path is None:
        return None, None
    fields = {"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "user": _who(),
              "host": socket.gethostname(), "pid": os.getpid(), "engine_version": __version__, **entry}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_regular(str(path), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)  # a FIFO would hang the job
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # read the last line and append after it as one step
            last = _last_line(fd)
            fields["prev"] = link_of(last) if last is not None else ""
            fields["hash"] = line_hash(fields)
            os.write(fd, (json.dumps(fields, sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)  # releases the lock
    except OSError as exc:
        return None, f"the audit log {path} cannot be written ({exc.strerror}); set ${ENV_AUDIT_LOG} to a writable file"
    return fields["hash"], None


def record(entry: dict[str, Any]) -> str | None:
    """Append ``entry``; returns a warning message when the log can't be written."""
    return append(entry)[1]
