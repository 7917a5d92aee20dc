"""Shared-memory frame slots: segment names, the slot header and its generation. Standard library plus numpy.

Used by both sides: the engine creates and owns every segment; the client (Blender's Python 3.11,
numpy < 2) attaches to them. Pitfalls handled here (see notes/engine-research.md §2):

- Python <= 3.12 registers *attached* segments with the resource tracker, which unlinks them when the
  attaching process exits, pulling the frame out from under the engine. Attachers here never touch the
  tracker: on POSIX they map the segment with ``_posixshmem.shm_open`` + ``mmap`` directly. The creator
  (the engine) keeps tracking, so its tracker unlinks its segments even after a ``kill -9``.
- ``np.ndarray(buffer=...)`` views do not pin the mapping and segfault after ``close()``. Views here are
  made with ``np.frombuffer`` (which pins it), so closing a slot with live views raises BufferError
  instead; ``Slot.close()`` then reports False and the caller retries once the views are gone.
- First touch of a fresh segment costs ~7x a normal copy: slots are pre-faulted once and reused.

Slot layout: a 4 KiB header (magic, layout version, owner pid, client id, capacity, generation) then
the payload, page aligned. Ownership moves by message, never by polling shared flags: whoever is about
to write bumps the generation and names it in the message; the reader checks the header still holds it,
so a stale or duplicated reply (after a cancel or a restart) is detected instead of misread.

Segment names: ``ffe_<owner pid>_<12 hex>`` (<= 30 characters, the macOS limit), so a start-up sweep
can remove the segments of owners that died (``sweep_dead_segments``). The 48 random bits are drawn afresh for
every segment: /dev/shm is world-readable, and a name another local user can predict is one they can take first.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import secrets
import struct
import sys
import threading
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from .. import outputs

pid_alive = outputs.pid_alive  # one rule for 'is that process alive' (engine/outputs.py), re-exported here

SEGMENT_PREFIX = "ffe"
HEADER_BYTES = 4096
PAGE = 4096
MAGIC = b"FFSLOT\x00\x01"
LAYOUT_VERSION = 1
_HEADER = struct.Struct("<8sIIqqqq")  # magic, layout, reserved, owner pid, client id, capacity, generation
_GEN_OFFSET = 40
# The older form (a per-engine token and a counter) is still recognised, so a sweep removes its leftovers.
_NAME_RE = re.compile(rf"^{SEGMENT_PREFIX}_(\d+)_(?:[0-9a-f]{{12}}|[0-9a-f]{{4}}_\d+)$")

IS_WINDOWS = sys.platform == "win32"
if not IS_WINDOWS:
    import _posixshmem


class SlotError(Exception):
    """A slot could not be created, attached or used; the message names the slot and the problem."""


class StaleSlot(SlotError):
    """A slot's generation moved on: the message refers to contents that were replaced."""


# ------------------------------------------------------------------------------------------------ naming


class SegmentNamer:
    """Segment names for one owner process: unpredictable, so they cannot be squatted ahead of time."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid

    def next(self) -> str:
        return f"{SEGMENT_PREFIX}_{self.pid}_{secrets.token_hex(6)}"


def owner_pid(name: str) -> int | None:
    m = _NAME_RE.match(name)
    return int(m.group(1)) if m else None


def list_segments() -> list[str]:
    """Our segments visible in /dev/shm (Linux). Other systems cannot list them: returns []."""
    try:
        return sorted(n for n in os.listdir("/dev/shm") if _NAME_RE.match(n))
    except OSError:
        return []


def unlink_segment(name: str) -> bool:
    if IS_WINDOWS:
        return False  # Windows frees a mapping when its last handle closes
    try:
        _posixshmem.shm_unlink("/" + name)
        return True
    except FileNotFoundError:
        return False


def sweep_dead_segments() -> list[str]:
    """Unlink segments whose owner process is gone (a crash the owner's resource tracker did not clean)."""
    removed = []
    for name in list_segments():
        pid = owner_pid(name)
        if pid is not None and not pid_alive(pid):
            try:
                if unlink_segment(name):
                    removed.append(name)
            except OSError:
                pass
    return removed


_CREATE_LOCK = threading.Lock()  # one segment made at a time: reservations never race each other
_FALLOCATE = sys.platform.startswith("linux") and hasattr(os, "posix_fallocate")


class SegmentNameTaken(SlotError):
    """The name exists already (left over, or squatted by another local user): pick another name."""


def _no_space(capacity: int, free: int | None) -> str:
    have = f"/dev/shm has {free} bytes free" if free is not None else "the shared memory is full"
    return f"not enough shared memory for a slot of {capacity} bytes: {have} (in Docker raise --shm-size)"


def _reserve(name: str, size: int) -> None:
    """Create segment ``name`` (exclusively, mode 0600) with all its ``size`` bytes allocated, or raise."""
    try:
        fd = _posixshmem.shm_open("/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    except FileExistsError:
        raise SegmentNameTaken(f"shared memory {name} exists already (another process made it)") from None
    except OSError as exc:
        raise SlotError(f"cannot create shared memory {name}: {exc}") from None
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        unlink_segment(name)
        if exc.errno in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
            raise SlotError(_no_space(size - HEADER_BYTES, shm_free_bytes())) from None
        raise SlotError(f"cannot reserve {size} bytes of shared memory for {name}: {exc}") from None
    finally:
        os.close(fd)


def shm_free_bytes() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
        return st.f_bavail * st.f_frsize
    except (OSError, AttributeError):
        return None


# ------------------------------------------------------------------------------------------------- slots


class Slot:
    """One shared-memory segment: a header and ``capacity`` payload bytes."""

    def __init__(self, name: str, mapping: Any, buf: memoryview, capacity: int, owner: bool) -> None:
        self.name = name
        self.capacity = capacity
        self.owner = owner
        self._mapping = mapping  # SharedMemory (creator, Windows) or mmap (POSIX attacher)
        self._buf: memoryview | None = buf
        self.closed = False

    # -- life cycle

    @classmethod
    def create(cls, name: str, capacity: int, *, client_id: int = 0, prefault: bool = True) -> Slot:
        """Create (engine side). The creator's resource tracker unlinks it if this process is killed.

        Creations are serialised and the space is reserved before anything is mapped (``posix_fallocate`` on
        Linux; elsewhere a free-space check under the same lock): a full /dev/shm is a clean SlotError, never
        a SIGBUS when the prefault touches pages tmpfs cannot give."""
        if len(name) > 30:
            raise SlotError(f"segment name {name!r} is longer than 30 characters")
        size = HEADER_BYTES + capacity
        with _CREATE_LOCK:
            if _FALLOCATE:
                _reserve(name, size)
                shm_args: dict[str, Any] = {"name": name}  # attaching registers it with our tracker too
            else:
                free = shm_free_bytes()
                if free is not None and size > free:
                    raise SlotError(_no_space(capacity, free))
                shm_args = {"name": name, "create": True, "size": size}
            try:
                shm = shared_memory.SharedMemory(**shm_args)
            except FileExistsError:
                raise SegmentNameTaken(f"shared memory {name} exists already (another process made it)") from None
            except OSError as exc:
                if _FALLOCATE:
                    unlink_segment(name)
                raise SlotError(f"cannot create shared memory {name} of {capacity} bytes: {exc}") from None
        slot = cls(name, shm, shm.buf, capacity, owner=True)
        _HEADER.pack_into(shm.buf, 0, MAGIC, LAYOUT_VERSION, 0, os.getpid(), client_id, capacity, 0)
        if prefault:
            slot.prefault(write=True)
        return slot

    @classmethod
    def attach(cls, name: str, *, prefault: bool = True) -> Slot:
        """Attach (client side) without registering with the resource tracker."""
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise SlotError(f"{name!r} is not an engine slot name")
        if IS_WINDOWS:
            try:
                shm = shared_memory.SharedMemory(name=name)
            except OSError as exc:
                raise SlotError(f"cannot attach slot {name}: {exc}") from None
            mapping: Any = shm
            buf = shm.buf
        else:
            try:
                fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
            except OSError as exc:
                raise SlotError(f"cannot attach slot {name}: {exc}") from None
            try:
                size = os.fstat(fd).st_size
                if size < HEADER_BYTES:
                    raise SlotError(f"slot {name} is {size} bytes, smaller than its header")
                mapping = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            buf = memoryview(mapping)
        magic, layout, _r, _pid, _cid, capacity, _gen = _HEADER.unpack_from(buf, 0)
        if magic != MAGIC or layout != LAYOUT_VERSION or capacity + HEADER_BYTES > len(buf):
            buf.release()
            mapping.close()
            raise SlotError(f"slot {name} has an unknown header (layout {layout}); engine and client differ")
        slot = cls(name, mapping, buf, capacity, owner=False)
        if prefault:
            slot.prefault(write=False)
        return slot

    def prefault(self, *, write: bool) -> None:
        """Touch every page once now so the first frame copy does not pay the page faults."""
        pages = np.frombuffer(self.buf, dtype=np.uint8)[HEADER_BYTES::PAGE]
        if write:
            pages[...] = 0  # the creator allocates the tmpfs pages
        else:
            int(pages.max())  # maps the already allocated pages into this process
        del pages

    def close(self) -> bool:
        """Unmap. Returns False (and stays open) while numpy views of the slot are still alive."""
        if self.closed:
            return True
        try:
            if self._buf is not None:
                self._buf.release()
        except BufferError:
            return False
        self._buf = None
        try:
            self._mapping.close()
        except BufferError:
            return False
        self.closed = True
        return True

    def unlink(self) -> None:
        """Remove the name (owner only). Mappings stay valid until closed."""
        if self.owner:
            try:
                self._mapping.unlink()
            except FileNotFoundError:
                pass

    # -- header

    @property
    def buf(self) -> memoryview:
        if self._buf is None:
            raise SlotError(f"slot {self.name} is closed")
        return self._buf

    @property
    def generation(self) -> int:
        return struct.unpack_from("<q", self.buf, _GEN_OFFSET)[0]

    def bump(self) -> int:
        """Announce new contents: the next generation, written into the header and returned."""
        gen = self.generation + 1
        struct.pack_into("<q", self.buf, _GEN_OFFSET, gen)
        return gen

    def check_generation(self, gen: int) -> None:
        current = self.generation
        if current != gen:
            raise StaleSlot(f"slot {self.name} holds generation {current}, the message refers to {gen} "
                            "(stale or duplicated message)")

    # -- payload

    def array(self, shape: int | tuple[int, ...] | list[int], dtype: Any = np.float32,
              offset: int = 0) -> np.ndarray:
        """A zero-copy view of the payload. Delete it before ``close()``."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dt = np.dtype(dtype)
        count = 1
        for s in shape:
            count *= int(s)
        nbytes = count * dt.itemsize
        if offset < 0 or offset + nbytes > self.capacity:
            raise SlotError(f"{nbytes} bytes at offset {offset} do not fit slot {self.name} "
                            f"of {self.capacity} bytes")
        return np.frombuffer(self.buf, dtype=dt, count=count, offset=HEADER_BYTES + offset).reshape(shape)

    def write(self, pixels: np.ndarray, offset: int = 0) -> None:
        view = self.array(pixels.shape, pixels.dtype, offset)
        np.copyto(view, pixels, casting="no")
        del view


def align(n: int, to: int = 64) -> int:
    return (n + to - 1) // to * to
