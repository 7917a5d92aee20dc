"""Hash checks of model files, and the record of files already verified.

A file is accepted when its sha256 is one the catalogue pins, or, where upstream publishes only a CRC32 sidecar,
when its CRC32 equals the sidecar's (downloads). An entry without a published sha256 imported offline is "trusted on
first use": its sha256 is recorded then and is what it is held to afterwards (a checksum lying next to the file in
the import folder proves nothing). Once accepted, its sha256, size, mtime and ctime go into ``verified.json`` in the
models folder, so later loads re-hash a file whenever any of those changed on disk.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.io import atomic
from engine.models.catalogue import ModelEntry

LOCK_NAME = "verified.json"
_CHUNK = 1 << 20
_lock = threading.Lock()


@dataclass(frozen=True)
class Digests:
    sha256: str
    crc32: str  # 8 lowercase hex digits, as FaceFusion's .hash sidecars
    size: int


class Hasher:
    """sha256, CRC32 and size of bytes as they stream by (a copy is checked as it is written, before its rename)."""

    def __init__(self) -> None:
        self.sha, self.crc, self.size = hashlib.sha256(), 0, 0

    def update(self, chunk: bytes) -> None:
        self.sha.update(chunk)
        self.crc = zlib.crc32(chunk, self.crc)
        self.size += len(chunk)

    def digests(self) -> Digests:
        return Digests(self.sha.hexdigest(), f"{self.crc & 0xFFFFFFFF:08x}", self.size)


def digests(path: Path) -> Digests:
    h = Hasher()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.digests()


def copy_checked(src: Any, dest: Path, entry: ModelEntry, sidecar_crc32: str | None = None, *,
                 first_use: bool = False) -> Digests:
    """Stream the binary file object ``src`` into ``dest`` (engine.io.atomic: never through a link), hashing the
    bytes written; ``dest`` is replaced only when they pass ``accept`` (else HashMismatch and nothing changed)."""
    h = Hasher()
    with atomic.atomic_file(dest) as out:
        while chunk := src.read(_CHUNK):
            h.update(chunk)
            out.write(chunk)
        return accept(entry, h.digests(), dest.name, sidecar_crc32, first_use=first_use)


def parse_crc32_sidecar(text: str) -> str:
    value = text.strip().lower()
    if len(value) != 8 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(f"not a CRC32 sidecar: {text[:40]!r}")
    return value


class HashMismatch(Exception):
    """The file is not the catalogue's file."""


def check(entry: ModelEntry, path: Path, sidecar_crc32: str | None = None) -> Digests:
    """Hash ``path`` and accept it for ``entry`` or raise ``HashMismatch`` (the caller removes the file)."""
    return accept(entry, digests(path), path.name, sidecar_crc32)


def accept(entry: ModelEntry, d: Digests, name: str, sidecar_crc32: str | None = None, *,
           first_use: bool = False) -> Digests:
    """``d`` if those are the digests of ``entry``'s file, else HashMismatch. ``first_use``: an entry without a
    published sha256 and no sidecar is accepted as it is (the caller records it as trusted on first use)."""
    if entry.size_exact and d.size != entry.size:
        raise HashMismatch(f"{name}: {d.size} bytes, the catalogue says {entry.size}")
    if entry.sha256:
        if d.sha256 in entry.sha256:
            return d
        if not sidecar_crc32:
            raise HashMismatch(f"{name}: sha256 {d.sha256[:16]}… is not the catalogue's {entry.sha256[0][:16]}…")
    if sidecar_crc32:
        if d.crc32 == sidecar_crc32:
            return d
        raise HashMismatch(f"{name}: CRC32 {d.crc32} differs from the upstream sidecar's {sidecar_crc32}")
    if first_use:
        return d
    raise HashMismatch(f"{name}: no hash to check it against (the catalogue pins none and no .hash sidecar)")


# -- the verified record -----------------------------------------------------------------------------------------

def _lock_path(models_dir: Path) -> Path:
    return models_dir / LOCK_NAME


def read_record(models_dir: Path) -> dict[str, dict]:
    try:
        return json.loads(_lock_path(models_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_record(models_dir: Path, data: dict[str, dict]) -> None:
    """Replace the record atomically. The temporary file is unique to this writer: engines started side by side
    (a farm node's workers, a preview beside a render) once shared one name, and the second's rename failed. Two
    writers can still each drop the other's newest entry; that file is then only hashed again on its next load."""
    models_dir.mkdir(parents=True, exist_ok=True)
    atomic.write_text(_lock_path(models_dir), json.dumps(data, indent=1, sort_keys=True))


FIRST_USE = "first-use"  # the trust of a file the catalogue publishes no sha256 for: its first import's sha256


def record(models_dir: Path, entry: ModelEntry, path: Path, d: Digests, how: str) -> None:
    with _lock:
        data = read_record(models_dir)
        st = path.stat()
        old = data.get(entry.id) or {}
        since = old.get("since") if old.get("sha256") == d.sha256 and old.get("since") else _now()
        data[entry.id] = {"file": str(path), "sha256": d.sha256, "crc32": d.crc32, "size": d.size,
                          "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "verified_by": how,
                          "trust": "catalogue" if entry.sha256 else FIRST_USE, "since": since}
        _write_record(models_dir, data)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def trust(models_dir: Path, entry: ModelEntry) -> str:
    """How the installed file of ``entry`` is trusted, in words (models list, provider events, EXR provenance)."""
    if entry.sha256:
        return "sha256 published in the catalogue"
    rec = read_record(models_dir).get(entry.id) or {}
    if not rec.get("sha256"):
        return "not verified"
    return f"trusted on first use: sha256 {rec['sha256']} recorded {rec.get('since') or 'at import'}"


def forget(models_dir: Path, model_id: str) -> None:
    with _lock:
        data = read_record(models_dir)
        if data.pop(model_id, None) is not None:
            _write_record(models_dir, data)


def verified_unchanged(models_dir: Path, entry: ModelEntry, path: Path) -> bool:
    """True when ``path`` was verified before and neither its size, its mtime nor its ctime changed since."""
    rec = read_record(models_dir).get(entry.id)
    if not rec or rec.get("file") != str(path):
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    if (st.st_size, st.st_mtime_ns, st.st_ctime_ns) != (rec.get("size"), rec.get("mtime_ns"), rec.get("ctime_ns")):
        return False  # ctime too: an edit with its mtime put back still moves it
    return not entry.sha256 or rec.get("sha256") in entry.sha256


def verify_installed(entry: ModelEntry, path: Path, models_dir: Path, *, full: bool = False) -> Digests | None:
    """Re-check an installed file. With ``full`` it is re-hashed even when unchanged.

    Files verified against a CRC32 sidecar are re-checked against the sha256 recorded when they were accepted.
    Returns the digests, or raises ``HashMismatch``.
    """
    if not full and verified_unchanged(models_dir, entry, path):
        return None
    rec = read_record(models_dir).get(entry.id) or {}
    if entry.sha256:
        d = check(entry, path)
        record(models_dir, entry, path, d, "sha256")
        return d
    d = digests(path)
    if rec.get("sha256") == d.sha256:
        record(models_dir, entry, path, d, rec.get("verified_by", "crc32"))
        return d
    raise HashMismatch(f"{path.name}: changed since it was verified, or never verified "
                       f"(fetch or import it again)")
