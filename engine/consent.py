"""Consent per source identity: before a likeness is rendered, someone confirms that they have the right to use
it for this work. Stored by the source-identity hash the engine computes from the photos' pixels (never the photo):
who, when, the hash and a note. A render of an identity without a confirmation stops before anything is written.

Store: JSON at $FACE_FUSION_CONSENT_FILE, else ``consent.json`` in the per-user data folder (a project or a farm
points the variable at the file saved with the shot). $FACE_FUSION_CONSENT_ALL="<note>" confirms every identity a
process renders (tests, a supervised batch); each render records it in the audit log; a studio policy can forbid it.
A job may also carry confirmations with it (``given``: those the Blender add-on saved in the .blend, so a headless
render on a machine with an empty store works); they hold for that job only and are never stored, and a
revocation in this machine's store beats them.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import errno
import fcntl
import getpass
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine import policy
from engine.errors import EngineError
from engine.io import atomic, bounded_json
from engine.io.files import CLOEXEC, NOFOLLOW, open_regular
from engine.job import ImageInput, SwapJob
from engine.models.catalogue import default_models_dir

ENV_FILE = "FACE_FUSION_CONSENT_FILE"
ENV_ALL = "FACE_FUSION_CONSENT_ALL"
BY_FILE = "the .blend file"

# The confirmations the running job carries (None: a job that carries none, e.g. the command line). A context
# variable: every server worker thread runs its own job.
_GIVEN: contextvars.ContextVar[dict[str, dict[str, Any]] | None] = contextvars.ContextVar("consent_given",
                                                                                           default=None)


@contextlib.contextmanager
def given(records: list[dict[str, Any]] | None) -> Iterator[None]:
    """Within this block, ``lookup`` also accepts ``records`` (identity, who, when, note each); None: no change."""
    if records is None:
        yield
        return
    token = _GIVEN.set({r["identity"]: r for r in records if isinstance(r, dict) and r.get("identity")})
    try:
        yield
    finally:
        _GIVEN.reset(token)


def store_path() -> Path:
    value = os.environ.get(ENV_FILE, "")
    return Path(value).expanduser() if value else default_models_dir().parent / "consent.json"


def identity_digest(sources: list[ImageInput]) -> str:
    """The source-identity hash, exactly as the engine's source analysis computes it (8-bit sRGB pixels)."""
    from engine.io import colour
    from engine.sources import load_photo_srgb

    if not sources:
        raise EngineError("no source photo given", "pass at least one --source photo of the new face")
    digest = hashlib.sha256()
    for src in sources:
        digest.update(colour.to_u8(load_photo_srgb(src)).tobytes())
    return digest.hexdigest()


def _read(path: Path) -> dict[str, Any]:
    """The store, checked entry by entry: anything this engine would not have written is refused with the entry
    and field named (a store edited by hand, or another version's, must not become a traceback mid-render)."""
    todo = f"fix or remove the entry, or set ${ENV_FILE} to another store"
    try:  # never through a link (whoever planted it would choose the consents) and never blocked on a FIFO
        fd = open_regular(str(path), os.O_RDONLY | NOFOLLOW | CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        why = "it is a symbolic link (the store must be the file itself)" if exc.errno == errno.ELOOP else \
            (exc.strerror or str(exc))
        raise EngineError(f"the consent store {path} cannot be read ({why})",
                          f"point ${ENV_FILE} at the store itself") from exc
    try:
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_STORE_BYTES + 1)
        if len(raw) > MAX_STORE_BYTES:
            raise ValueError(f"larger than {MAX_STORE_BYTES >> 20} MB")
        data = bounded_json.loads(raw)
    except (OSError, ValueError) as exc:
        raise EngineError(f"the consent store {path} cannot be read ({exc})", f"fix it or set ${ENV_FILE}") from exc
    if not isinstance(data, dict):
        raise EngineError(f"the consent store {path} is not a JSON object", f"fix it or set ${ENV_FILE}")
    for key, entry in data.items():
        problem = _entry_problem(entry)
        if problem:
            raise EngineError(f"the consent store {path}: the entry {key[:16]!r} {problem}", todo)
    return data


MAX_STORE_BYTES = 64 << 20  # thousands of identities fit in a few MB


def _entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return f"is a {type(entry).__name__}, not an object"
    for name in ("identity", "who", "when", "note"):
        if name in entry and not isinstance(entry[name], str):
            return f"has a '{name}' that is not text"
    if "revoked" in entry:
        rev = entry["revoked"]
        if not isinstance(rev, dict):
            return "has a 'revoked' that is not an object with 'who' and 'when'"
        if not isinstance(rev.get("when"), str) or not isinstance(rev.get("who", ""), str):
            return "has a 'revoked' without its 'when' (or 'who') as text"
    return None


def _update(change: Any) -> dict[str, Any]:
    """Read-modify-write the store under an exclusive lock, replaced atomically."""
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # The lock file is opened without following a link (a studio share is where another user can plant one).
    lock_path = str(path) + ".lock"
    try:
        lock = open_regular(lock_path, os.O_RDWR | os.O_CREAT | NOFOLLOW | CLOEXEC, 0o644)
    except OSError as exc:
        raise EngineError(f"the consent store's lock file {lock_path} cannot be opened ("
                          + ("it is a symbolic link, never written through" if exc.errno == errno.ELOOP else
                             exc.strerror or str(exc)) + ")", f"remove it, or set ${ENV_FILE}") from exc
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = _read(path)
        entry = change(data)
        atomic.write_text(path, json.dumps(data, indent=1, sort_keys=True), sync=True)
    finally:
        os.close(lock)  # releases the lock
    return entry


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def grant(identity: str, note: str, who: str | None = None) -> dict[str, Any]:
    if not note.strip():
        raise EngineError("a consent needs a note", "say whose likeness it is and for which work, e.g. --note "
                                                    "'J. Doe, signed release 2026-11-02, shot 042'")
    entry = {"identity": identity, "who": who or _who(), "when": _now(), "note": note.strip()}

    def change(data: dict[str, Any]) -> dict[str, Any]:
        data[identity] = entry
        return entry
    return _update(change)


def revoke(identity: str, who: str | None = None, even_unknown: bool = False) -> dict[str, Any] | None:
    """Withdraw the identity's confirmation. ``even_unknown``: record the revocation even where this store holds
    none (it then beats copies carried in project files, e.g. a .blend's)."""
    def change(data: dict[str, Any]) -> dict[str, Any] | None:
        entry = data.get(identity)
        if entry is None and even_unknown:
            entry = data[identity] = {"identity": identity}
        if entry is not None and "revoked" not in entry:
            entry["revoked"] = {"who": who or _who(), "when": _now()}
        return entry
    return _update(change)


def lookup(identity: str) -> dict[str, Any] | None:
    """The identity's standing confirmation (stored, or the process-wide one), or None."""
    entry = _read(store_path()).get(identity)
    if isinstance(entry, dict) and "revoked" not in entry:
        return {**entry, "by": "store"}
    carried = (_GIVEN.get() or {}).get(identity)
    if carried is not None and not (isinstance(entry, dict) and "revoked" in entry):
        return {k: str(carried.get(k, "")) for k in ("identity", "who", "when", "note")} | {"by": BY_FILE}
    blanket = os.environ.get(ENV_ALL, "").strip()
    if blanket and not policy.blanket_consent_forbidden():
        return {"identity": identity, "who": _who(), "when": _now(), "note": blanket, "by": f"${ENV_ALL}"}
    return None


def revocation(identity: str) -> dict[str, Any] | None:
    """{who, when} of the identity's revocation in the store, or None."""
    entry = _read(store_path()).get(identity)
    return entry.get("revoked") if isinstance(entry, dict) else None


def require(identity: str) -> dict[str, Any]:
    entry = lookup(identity)
    if entry is None:
        revoked = revocation(identity)
        why = f"consent for source identity {identity[:12]} was revoked on {revoked['when']}" if revoked else \
            f"no consent is recorded for source identity {identity[:12]}"
        if _GIVEN.get() is not None:  # a job from Blender: the confirmation is given there and saved with the .blend
            raise EngineError(f"{why}: nothing was rendered",
                              "confirm that you have the right to use this likeness in Blender (Bake or Preview "
                              "asks for it; a headless render reads the confirmation saved with the .blend: open "
                              "it in Blender, confirm, save)")
        raise EngineError(f"{why}: nothing was rendered",
                          "confirm that you have the right to use this likeness for this work: python -m engine "
                          "consent grant --source PHOTO... --note 'whose face, which release, which work' "
                          "(or swap --consent 'note')")
    return entry


def checked(job: SwapJob) -> SwapJob:
    """The job, once its source identity has a confirmation; raises EngineError (nothing written) otherwise."""
    require(identity_digest(job.sources))
    return job


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
