"""The engine's job queue: submission, the render and interactive lanes, the workers, the terminal event.

Every job kind is a row of ``protocol.JOB_KINDS``: its lane, which images it claims, whether it takes
settings or writes files, and the name of its runner in ``engine.server.jobs`` (looked up when the job
runs). A mixin of ``Server``, over ``ClientSlots``.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import protocol, transport
from .. import settings as settings_schema
from ..errors import EngineError, JobCancelled
from . import jobs as runners
from .client_slots import ClientSlots
from .connections import ClientConn, Refused

log = logging.getLogger("engine.server")

REPLIED: dict[str, Any] = {}  # a handler's result meaning "the reply was already sent"
LIVE_STATES = ("queued", "running")


class Job:
    """A job in the engine: queued, then running in a worker, then gone once its terminal event is sent."""

    def __init__(self, jid: int, kind: str, client: ClientConn, req: dict[str, Any]) -> None:
        self.id = jid
        self.kind = kind
        self.client = client
        self.req = req
        self.cancel = threading.Event()
        self.state = "queued"
        self.inputs: dict[str, Any] = {}  # the kind's image field, sources, settings: what the runner gets
        self.progress: dict[str, Any] = {}
        self.started = 0.0


class JobQueue(ClientSlots):
    jobs: dict[int, Job]
    stop_event: threading.Event
    queue_cv: threading.Condition
    allowed_roots: list[str]
    engines: runners.EngineHolder
    _job_ids: itertools.count
    render_queue: deque[Job]
    interactive_queue: deque[Job]
    _shutdown_error: Callable[[], dict[str, Any]]

    def _lane(self, kind: protocol.JobKind) -> deque[Job]:
        return self.render_queue if kind.lane == "render" else self.interactive_queue

    def _submit(self, client: ClientConn, req: dict[str, Any]) -> dict[str, Any]:
        kind = protocol.JOB_KINDS[req["op"]]
        settings = settings_schema.validate(req.get("settings", {})) if kind.settings else {}
        if kind.writes_files:
            # The job keeps the resolved folder, never the spelling it came with: the pipeline makes the folder
            # with abspath, which collapses "link/.." textually and would land outside the root.
            req = {**req, "output_dir": self._check_output_dir(req["output_dir"])}
        with self.lock:
            job = Job(next(self._job_ids), kind.name, client, req)
            try:
                if kind.image:  # the responsible-use kinds (consent, sign) have no main image
                    job.inputs[kind.image] = self._claim_image(client, job.id, req[kind.image])
                job.inputs["sources"] = [self._claim_image(client, job.id, s) for s in req.get("sources", [])]
                if kind.pixels_back and req.get("out_slot"):
                    self._claim_slot(client, job.id, req["out_slot"], "out_slot")
            except Exception:
                self.slots.release_holder(job.id)
                raise
            job.inputs["settings"] = settings
            self.jobs[job.id] = job
            client.jobs.add(job.id)
            lane = self._lane(kind)
            # Reply before any event of the job can be sent, so the client knows the job id first.
            client.send(protocol.reply_ok(req["id"], {"job": job.id, "queued": len(lane) + 1}))
            lane.append(job)
            self.queue_cv.notify_all()
        return REPLIED

    def _check_output_dir(self, path: str) -> str:
        """The real folder ``path`` names (every symlink resolved), refused unless it lies under an allowed root."""
        if not os.path.isabs(path):
            raise Refused(f"output_dir {path!r} must be an absolute path")
        real = os.path.realpath(path)
        for root in self.allowed_roots:
            try:
                if os.path.commonpath([real, root]) == root:
                    return real
            except ValueError:  # different drives on Windows
                continue
        raise Refused(f"output_dir {path!r} is outside the allowed output root(s) "
                      f"{', '.join(self.allowed_roots)}; choose a folder under one of them or start "
                      "the engine with --allowed-output-root")

    def _cancel(self, client: ClientConn, jid: int) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get(jid)
            if job is None:
                raise Refused(f"unknown job {jid}")
            if job.client is not client:
                raise Refused(f"job {jid} belongs to another client")
            job.cancel.set()
            if job.state == "queued":
                self._finish(job, {"type": "cancelled"})
            return {"job": jid, "state": job.state}

    def _finish(self, job: Job, terminal: dict[str, Any]) -> None:
        """End the job: let go of its slots (lock held), then send its single terminal event.

        Sending only queues the event (see ClientConn), so holding the lock here never waits on a client.
        """
        if job.state in protocol.TERMINAL_EVENTS:
            return
        job.state = terminal["type"]
        job.inputs = {}
        self.slots.release_holder(job.id)
        job.client.jobs.discard(job.id)
        self.jobs.pop(job.id, None)
        job.client.send(protocol.event(job.id, terminal))

    def _worker(self, queue: deque[Job]) -> None:
        while True:
            with self.lock:
                while not queue and not self.stop_event.is_set():
                    self.queue_cv.wait(0.5)
                if self.stop_event.is_set():
                    return
                job = queue.popleft()
                if job.state != "queued":
                    continue
                if job.cancel.is_set():
                    self._finish(job, {"type": "cancelled"})
                    continue
                job.state = "running"
                job.started = time.monotonic()
            terminal = self._run(job)
            if terminal["type"] == "cancelled" and self.stop_event.is_set():
                terminal = self._shutdown_error()  # stopped by the engine, not by its client
            with self.lock:
                self._finish(job, terminal)

    def _run(self, job: Job) -> dict[str, Any]:
        inputs = job.inputs

        def emit(ev: dict[str, Any]) -> None:
            if ev.get("type") not in protocol.EVENT_TYPES:  # passed on all the same; clients skip unknown types
                log.warning("job %d sends event type %r, which protocol.EVENT_TYPES does not list", job.id,
                            ev.get("type"))
            if ev.get("type") == "progress":
                job.progress = {k: ev.get(k) for k in ("done", "total", "fps", "eta")}
            if not job.client.send(protocol.event(job.id, ev)):
                job.cancel.set()  # nobody is listening any more

        try:
            kind = protocol.JOB_KINDS[job.kind]
            if kind.writes_files:  # a symlink swapped in while the job waited in the queue: resolve and check again
                job.req = {**job.req, "output_dir": self._check_output_dir(job.req["output_dir"])}
            run = getattr(runners, kind.runner)  # by name, when it runs: the table travels without the runners
            out = run(self.engines, job.req, inputs.get(kind.image), inputs.get("sources", []),
                      inputs.get("settings", {}), emit, job.cancel)
            if job.cancel.is_set():
                raise JobCancelled()
            result = dict(out.fields)
            if out.layers:
                result.update(self._write_result(job, out))
            return {"type": "done", "seconds": round(time.monotonic() - job.started, 4), "result": result}
        except JobCancelled:
            return {"type": "cancelled"}
        except (EngineError, settings_schema.SettingsError, Refused, transport.SlotError) as exc:
            return {"type": "error", "message": str(exc)}
        except Exception as exc:
            log.error("job %d (%s) failed:\n%s", job.id, job.kind, traceback.format_exc())
            return {"type": "error", "message": f"internal engine error: {type(exc).__name__}: {exc}"}
        finally:
            inputs.clear()  # drop the slot views before the slots may be unmapped

    def _write_result(self, job: Job, out: runners.JobOutput) -> dict[str, Any]:
        """Copy result layers into the job's out slot (or a new, bigger one) and describe them."""
        table, nbytes = out.layout()
        nbytes = max(nbytes, 1)
        result: dict[str, Any] = {}
        name = job.req.get("out_slot")
        with self.lock:
            entry = self.slots.get(name) if name else None
            if entry is not None and entry.slot.capacity < nbytes:
                result["replaced"] = name
                self.slots.release([name], job.id)
                self._drop_slot(name)
                entry = None
        if entry is None:
            try:
                slot = self._new_slot(job.client, nbytes)
            except Refused:
                if not job.client.alive:
                    raise JobCancelled() from None  # the client is gone: nobody to report to
                raise
            with self.lock:
                if slot.name not in self.slots:  # the client disconnected just now, and its slots went with it
                    raise JobCancelled()
                self.slots.claim(slot.name, job.id)
        else:
            slot = entry.slot
        for layer, spec in zip(out.layers, table, strict=True):
            view = slot.array(layer.array.shape, layer.array.dtype, spec["offset"])
            if not np.shares_memory(view, layer.array):
                np.copyto(view, layer.array)
            del view
        gen = slot.bump()
        result.update({"slot": slot.name, "gen": gen, "capacity": slot.capacity, "layers": table})
        return result
