"""The slots one process holds, by name: which are in use, and which wait to be closed.

One type for both sides. The engine keeps every segment it made for its clients (``owner`` is the client,
``holder`` the job using it); the client keeps the segments it attached (``owner`` 0, ``holder`` the
request that put pixels in it or waits for a result in it). A slot dropped while held is *doomed*: it is
closed when its holder lets go. A slot whose close fails (numpy views still alive) becomes a *zombie*,
closed again on ``reap``. Every method takes the pool's own lock, so each call is atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .slots import Slot, SlotError


@dataclass(eq=False)
class PoolEntry:
    slot: Slot
    owner: int = 0  # engine side: the client the slot was made for; client side: 0
    holder: int | None = None  # the job (engine) or request (client) using it; None when free
    doomed: bool = False  # dropped while held: closed once the holder lets go


class SlotPool(Mapping[str, PoolEntry]):
    """Slots by name, with who holds each. A read-only mapping; changes go through the methods."""

    def __init__(self) -> None:
        self._entries: dict[str, PoolEntry] = {}
        self._zombies: list[Slot] = []
        self._lock = threading.RLock()

    # -- mapping

    def __getitem__(self, name: str) -> PoolEntry:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(e.slot.capacity for e in self._entries.values())

    @property
    def zombies(self) -> int:
        return len(self._zombies)

    # -- membership

    def add(self, slot: Slot, *, owner: int = 0, holder: int | None = None) -> PoolEntry:
        entry = PoolEntry(slot, owner, holder)
        with self._lock:
            self._entries[slot.name] = entry
        return entry

    def claim(self, name: str, holder: int) -> PoolEntry:
        """Mark ``name`` held by ``holder``; SlotError if another holds it (KeyError if unknown)."""
        with self._lock:
            entry = self._entries[name]
            if entry.holder is not None and entry.holder != holder:
                raise SlotError(f"slot {name} is in use by job {entry.holder}")
            entry.holder = holder
            return entry

    def pick(self, holder: int, *, min_bytes: int = 0, exclude: Iterable[str] = (),
             largest: bool = False) -> PoolEntry | None:
        """Claim a free slot of at least ``min_bytes``: the smallest that fits (or the largest), or None."""
        skip = set(exclude)
        with self._lock:
            free = [e for n, e in self._entries.items()
                    if e.holder is None and not e.doomed and n not in skip and e.slot.capacity >= min_bytes]
            if not free:
                return None
            entry = (max if largest else min)(free, key=lambda e: e.slot.capacity)
            entry.holder = holder
            return entry

    def release(self, names: Iterable[str], holder: int | None = None) -> None:
        """Let go of ``names`` (only those ``holder`` holds, when given); doomed ones are closed now."""
        with self._lock:
            for name in names:
                entry = self._entries.get(name)
                if entry is None or entry.holder is None or (holder is not None and entry.holder != holder):
                    continue
                entry.holder = None
                if entry.doomed:
                    del self._entries[name]
                    self._close(entry.slot)

    def release_holder(self, holder: int) -> None:
        """Let go of every slot ``holder`` holds (a job that ended)."""
        with self._lock:
            self.release([n for n, e in self._entries.items() if e.holder == holder], holder)

    def drop(self, name: str) -> PoolEntry | None:
        """Forget ``name``: unlink it (creator only), unmap it now, or once its holder lets go."""
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                return None
            entry.slot.unlink()
            if entry.holder is not None:
                entry.doomed = True
            else:
                del self._entries[name]
                self._close(entry.slot)
            return entry

    def retire(self, slot: Slot) -> None:
        """Close a slot that never joined the pool (or left it), keeping it as a zombie if views live."""
        with self._lock:
            self._close(slot)

    def trim(self, keep: int) -> list[str]:
        """Close the smallest free slots beyond ``keep`` free ones; their names (to free on the engine)."""
        with self._lock:
            idle = sorted((e for e in self._entries.values() if e.holder is None and not e.doomed),
                          key=lambda e: e.slot.capacity)
            extras = idle[:max(0, len(idle) - keep)]
            for entry in extras:
                del self._entries[entry.slot.name]
                self._close(entry.slot)
            return [e.slot.name for e in extras]

    def clear(self) -> None:
        """Close every slot, held or not (the connection is gone); retry the zombies."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
            self.reap()
            for entry in entries:
                self._close(entry.slot)

    def reap(self) -> None:
        """Close again the slots whose views have died since."""
        with self._lock:
            self._zombies = [s for s in self._zombies if not s.close()]

    def _close(self, slot: Slot) -> None:
        if not slot.close():
            self._zombies.append(slot)
