"""Audit log: JSON lines appended to a per-user file, so a studio can answer who made which synthetic face, when,
from which source identity, on which plate, with which settings, models, consent and watermark.

Tamper-evident: each line carries ``key`` (the id of the installation's audit key, engine/audit_key.py), ``prev``
(the previous line's ``hash``) and ``hash`` (an HMAC-SHA256 of the line without it, made with the key: recomputing
the chain after an edit needs the key), written under an exclusive lock on the log so concurrent engines and farm
workers keep one chain. An older log (lines without hashes, or an unkeyed chain) moves over with one migration
line that records how many lines came before and their sha256. A render writes a start line (its hash goes into
every EXR it writes) and a closing line naming it; ``python -m engine audit verify`` checks both
(engine/audit_chain.py). Threat model: bench/RELIABILITY.md.

Set $FACE_FUSION_AUDIT_LOG to a path (e.g. a shared folder) to collect it elsewhere, or to "off" to disable it.
Writing the log never fails a job: a log that cannot be written is reported as a warning.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import getpass
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any

from engine import __version__, audit_key
from engine.errors import EngineError
from engine.io.files import NOFOLLOW, open_regular
from engine.models.catalogue import default_models_dir

ENV_AUDIT_LOG = "FACE_FUSION_AUDIT_LOG"
MIGRATION = "audit-migration"  # the first keyed line of a log that had older lines
TAIL = 1 << 20  # bytes read back to find the last line (a line is a few kB)


def audit_path() -> Path | None:
    value = os.environ.get(ENV_AUDIT_LOG, "")
    if value.strip().lower() == "off":
        return None
    return Path(value).expanduser() if value else default_models_dir().parent / "audit.jsonl"


def line_hash(fields: dict[str, Any]) -> str:
    """The unkeyed hash of an older engine's line: its fields (``hash`` left out) as canonical JSON. Anyone can
    recompute it, which is why lines are now keyed (audit_key.mac); it only checks unkeyed lines of old logs."""
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
    """Append ``entry`` (plus who, where, when, the key's id and the chain). Returns (the line's MAC, a warning)."""
    path = audit_path()
    if path is None:
        return None, None
    fields = {"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "user": _who(),
              "host": socket.gethostname(), "pid": os.getpid(), "engine_version": __version__, **entry}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        key, kid = audit_key.load_or_create(path)
        # Never through a link planted at the log's name, never blocked on a FIFO there.
        fd = open_regular(str(path), os.O_RDWR | os.O_APPEND | os.O_CREAT | NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # read the last line and append after it as one step
            last = _last_line(fd)
            if last is not None and not _keyed(last):
                last = _write(fd, key, _migration(fd, kid, last))
            fields["key"] = kid
            fields["prev"] = link_of(last) if last is not None else ""
            _write(fd, key, fields)
        finally:
            os.close(fd)  # releases the lock
    except (OSError, EngineError) as exc:
        why = "it is a symbolic link, never written through" if getattr(exc, "errno", 0) == errno.ELOOP else \
            getattr(exc, "strerror", None) or str(exc)
        return None, f"the audit log {path} cannot be written ({why}); set ${ENV_AUDIT_LOG} to a writable file"
    return fields["hash"], None


def _write(fd: int, key: bytes, fields: dict[str, Any]) -> bytes:
    fields["hash"] = audit_key.mac(key, fields)
    raw = json.dumps(fields, sort_keys=True).encode()
    os.write(fd, raw + b"\n")
    return raw


def _keyed(raw: bytes) -> bool:
    try:
        fields = json.loads(raw)
    except ValueError:
        return False
    return isinstance(fields, dict) and isinstance(fields.get("key"), str) and "hash" in fields


def _migration(fd: int, kid: str, last: bytes) -> dict[str, Any]:
    """The line that moves an older log (lines without hashes, or an unkeyed chain) onto the keyed chain: it
    records how many lines came before and the sha256 of their bytes, so they cannot change unseen after it."""
    end = os.lseek(fd, 0, os.SEEK_END)
    digest, count, offset = hashlib.sha256(), 0, 0
    while offset < end:
        chunk = os.pread(fd, min(1 << 20, end - offset), offset)
        if not chunk:
            break
        digest.update(chunk)
        count += chunk.count(b"\n")
        offset += len(chunk)
    return {"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "user": _who(),
            "host": socket.gethostname(), "pid": os.getpid(), "engine_version": __version__,
            "job": MIGRATION, "lines": count, "prefix_sha256": digest.hexdigest(), "key": kid,
            "prev": link_of(last)}


def record(entry: dict[str, Any]) -> str | None:
    """Append ``entry``; returns a warning message when the log can't be written."""
    return append(entry)[1]
