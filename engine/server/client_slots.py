"""The engine's slots per client: allocation under per-client limits, ownership checks, claims by jobs.

Every segment lives in one ``transport.SlotPool`` (owner: the client id, holder: the job using it). A
mixin of ``Server``: the methods use its lock, clients and options; the caller holds ``self.lock`` where a
docstring says so.
"""

from __future__ import annotations

import argparse
import threading
from typing import Any

import numpy as np

from .. import transport
from ..job import ImageInput
from .connections import ClientConn, Refused

NAME_TRIES = 8


class ClientSlots:
    lock: threading.RLock
    opts: argparse.Namespace
    clients: dict[int, ClientConn]
    slots: transport.SlotPool
    namer: transport.SegmentNamer

    def _alloc_slot(self, client: ClientConn, nbytes: int) -> dict[str, Any]:
        slot = self._new_slot(client, nbytes)
        return {"slot": slot.name, "capacity": slot.capacity, "gen": slot.generation}

    def _new_slot(self, client: ClientConn, nbytes: int) -> transport.Slot:
        """A fresh slot for ``client``, within its limits and the free shared memory."""
        limit = self.opts.max_slot_bytes
        if nbytes > limit:
            raise Refused(f"absurd slot size {nbytes} bytes: at most {limit} bytes per slot "
                          "(start the engine with a larger --max-slot-bytes if this is really needed)")
        with self.lock:
            mine = [self.slots[n].slot.capacity for n in client.slots if n in self.slots]
        if len(mine) >= self.opts.max_client_slots:
            raise Refused(f"this client already holds {len(mine)} slots (at most "
                          f"{self.opts.max_client_slots}); free some with slot_free")
        if sum(mine) + nbytes > self.opts.max_client_bytes:
            raise Refused(f"this client would hold {sum(mine) + nbytes} bytes of shared memory, over the "
                          f"{self.opts.max_client_bytes}-byte limit; free some slots first")
        for attempt in range(NAME_TRIES):  # a name taken by another process (left over or squatted): draw again
            try:
                slot = transport.Slot.create(self.namer.next(), nbytes, client_id=client.id)  # reserves the space
                break
            except transport.SegmentNameTaken:
                if attempt == NAME_TRIES - 1:
                    raise
        with self.lock:
            if not client.alive:
                slot.unlink()
                self.slots.retire(slot)
                raise Refused("client disconnected")
            self.slots.add(slot, owner=client.id)
            client.slots.add(slot.name)
        return slot

    def _free_slot(self, client: ClientConn, name: str) -> dict[str, Any]:
        with self.lock:
            entry = self._own_slot(client, name)
            if entry.holder is not None:
                raise Refused(f"slot {name} is in use by job {entry.holder}; cancel or wait for it first")
            self._drop_slot(name)
        return {"freed": name}

    def _own_slot(self, client: ClientConn, name: str) -> transport.PoolEntry:
        entry = self.slots.get(name)
        if entry is None:
            raise Refused(f"unknown slot {name!r}: allocate it with slot_alloc first")
        if entry.owner != client.id:
            raise Refused(f"slot {name!r} belongs to another client")
        return entry

    def _drop_slot(self, name: str) -> None:
        """Unlink now; unmap now, or once the job using it lets go (lock held)."""
        entry = self.slots.drop(name)
        client = self.clients.get(entry.owner) if entry is not None else None
        if client is not None:
            client.slots.discard(name)

    def _claim_slot(self, client: ClientConn, job_id: int, name: str, what: str = "slot") -> transport.PoolEntry:
        """``client``'s slot ``name``, now held by the job (lock held)."""
        entry = self._own_slot(client, name)
        if entry.holder is not None and entry.holder != job_id:
            raise Refused(f"{what} {name} is in use by job {entry.holder}")
        return self.slots.claim(name, job_id)

    def _claim_image(self, client: ClientConn, job_id: int, ref: dict[str, Any]) -> ImageInput:
        """A file reference as is; a slot reference checked against the slot and held by the job (lock held)."""
        if "path" in ref:
            return ImageInput(path=ref["path"], colorspace=ref["colorspace"], name=ref["name"])
        name = ref["slot"]
        entry = self._own_slot(client, name)
        if entry.holder is not None and entry.holder != job_id:
            raise Refused(f"slot {name} is in use by job {entry.holder}")
        h, w, c = ref["shape"]
        need = h * w * c * 4
        if need > entry.slot.capacity:
            raise Refused(f"image of {w}x{h}x{c} {ref['dtype']} needs {need} bytes but slot {name} holds "
                          f"{entry.slot.capacity}")
        entry.slot.check_generation(ref["gen"])
        pixels = entry.slot.array((h, w, c), np.float32)
        pixels.flags.writeable = False
        self.slots.claim(name, job_id)
        return ImageInput(pixels=pixels, colorspace=ref["colorspace"], name=ref["name"] or f"slot {name}")
