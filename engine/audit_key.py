"""The audit chain's key: a per-installation secret, so that recomputing the chain after an edit needs it.

The key is 32 random bytes (as hex) in ``<log>.key`` beside the log, created 0600 on first use, or the file the
studio policy names (``"audit_key"``; then it is never created here: a studio hands it out). Each line carries the
key's id (a hash of the key, not the key) and an HMAC-SHA256 of its fields made with it. Threat model:
bench/RELIABILITY.md ("The audit chain's key").
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from engine import policy
from engine.errors import EngineError
from engine.io import atomic
from engine.io.files import open_regular

KEY_BYTES = 32


def key_path(log: Path) -> tuple[Path, bool]:
    """(the key file for ``log``, whether the studio policy names it)."""
    named = policy.load().get("audit_key")
    return (Path(named).expanduser(), True) if named else (log.with_name(log.name + ".key"), False)


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"face-fusion audit key id\0" + key).hexdigest()[:16]


def mac(key: bytes, fields: dict[str, Any]) -> str:
    """The line's MAC: its fields (``hash`` left out) as canonical JSON, HMAC-SHA256 with the key."""
    body = {k: v for k, v in fields.items() if k != "hash"}
    return hmac.new(key, json.dumps(body, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def read(path: Path) -> bytes:
    """The key in ``path`` (never through a link, never a FIFO); EngineError naming the file otherwise."""
    try:
        fd = open_regular(str(path), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            text = fh.read(4 * KEY_BYTES).strip()
    except FileNotFoundError:
        raise
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise EngineError(f"the audit key {path} cannot be read ({why})",
                          "restore the key file (0600, beside the log or where the studio policy says)") from exc
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) < KEY_BYTES:
        raise EngineError(f"the audit key {path} is not {KEY_BYTES} bytes of hex",
                          "restore the key file the log was written with")
    return key


def load_or_create(log: Path) -> tuple[bytes, str]:
    """(key, key id) for ``log``: read, or made once (0600, exclusive: concurrent engines agree on one key)."""
    path, named = key_path(log)
    try:
        key = read(path)
    except FileNotFoundError:
        if named:
            raise EngineError(f"the audit key {path} named by the studio policy does not exist",
                              "install the studio's key there, or fix the policy's audit_key") from None
        key = _create(path)
    return key, key_id(key)


def _create(path: Path) -> bytes:
    """Write a new key under a temporary name, then link it into place (link never replaces: if another engine
    made one first, that one is used)."""
    text = secrets.token_hex(KEY_BYTES) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(atomic.temp_name(path.name))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return read(path)
