"""``python -m engine serve``: the long-lived engine that Blender (and farm scripts) talk to.

One process, several clients. Each client connection is authenticated (multiprocessing's HMAC
challenge with a per-engine key), then says ``hello`` with its protocol version. Requests are JSON
(``engine.protocol``); pixels travel in shared-memory slots the engine creates and owns
(``engine.transport``). Jobs go to a queue: renders to ``--render-workers`` threads, interactive
jobs (preview, analyse, echo) to their own worker so a preview never waits behind a long bake.

Lifetime: an engine started by a client (``engine.client``) reads its key from stdin and exits when
stdin reaches EOF (the client died) or ``--parent-pid`` is gone; a standalone engine can be given
``--idle-timeout``. At start-up, segments left by dead engines are swept from /dev/shm. Every slot of a
client that disconnects is unlinked and every job of it cancelled, and the engine keeps serving.

Heartbeats: every ``HEARTBEAT_S`` seconds a heartbeat thread queues a ``heartbeat`` notice for each
greeted client that asked for them in its ``hello`` (through the client's own sender thread, at most one
waiting per client, so a client that stopped reading is never waited on). They go out whether jobs run
or not, so a client can tell a stuck engine (no heartbeat) from a slow frame (heartbeats, no events).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections import deque
from typing import Any

import numpy as np

from engine import PROTOCOL_VERSION, __version__, protocol, transport
from engine import settings as settings_schema
from engine.errors import EngineError, JobCancelled
from engine.job import ImageInput
from engine.server_jobs import EngineHolder, EngineReport, JobOutput, run_analyse, run_echo, run_preview, run_render

log = logging.getLogger("engine.server")

DEFAULT_MAX_SLOT_BYTES = 2 << 30  # 2 GiB: an 8K RGBA float32 frame with mattes fits
DEFAULT_MAX_CLIENT_BYTES = 16 << 30
DEFAULT_MAX_CLIENT_SLOTS = 64
HEARTBEAT_S = 1.0  # seconds between heartbeat notices to clients that asked for them


_REPLIED: dict[str, Any] = {}  # _dispatch result meaning "the reply was already sent"


class RequestError(Exception):
    """A request that is well formed but cannot be served; the message goes back in the error reply."""


class ClientConn:
    """One authenticated connection. Everything sent to it goes through its own sender thread, in order,
    so neither a worker nor the server's lock ever waits on a client that stopped reading."""

    def __init__(self, cid: int, channel: transport.Channel) -> None:
        self.id = cid
        self.channel = channel
        self.name = ""
        self.pid: int | None = None
        self.greeted = False
        self.heartbeat = False  # asked for heartbeats in its hello
        self._heartbeat_queued = False  # one waits in the queue: do not pile more behind a slow reader
        self.alive = True
        self.slots: set[str] = set()
        self.jobs: set[int] = set()
        self._out: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        threading.Thread(target=self._send_loop, name=f"send-{cid}", daemon=True).start()

    def send(self, message: dict[str, Any]) -> bool:
        """Queue a message; False once the client is gone."""
        if not self.alive:
            return False
        self._out.put(message)
        return True

    def send_heartbeat(self) -> None:
        """Queue a heartbeat unless one is still waiting to go out (never blocks)."""
        if not self.alive or self._heartbeat_queued:
            return
        self._heartbeat_queued = True
        self._out.put(protocol.heartbeat(time.monotonic()))

    def close(self) -> None:
        """Flush what is queued, then close (wakes this client's reader with EOF)."""
        self.alive = False
        self._out.put(None)

    def _send_loop(self) -> None:
        while True:
            msg = self._out.get()
            if msg is None:
                break
            if msg.get("kind") == "notice" and msg["notice"].get("type") == "heartbeat":
                self._heartbeat_queued = False
                msg = protocol.heartbeat(time.monotonic())  # the time it really leaves
            try:
                self.channel.send(msg)
            except protocol.ProtocolError as exc:  # a message over the control limit: say so instead
                if msg.get("kind") == "event":
                    fallback = protocol.event(msg["job"], {"type": "error", "message": str(exc)})
                else:
                    fallback = protocol.reply_error(msg.get("id", 0), str(exc))
                self._out.put(fallback)
            except (OSError, EOFError, ValueError):
                break
        self.alive = False
        transport.shutdown_connection(self.channel.conn)
        self.channel.close()


class SlotEntry:
    def __init__(self, slot: transport.Slot, client_id: int) -> None:
        self.slot = slot
        self.client_id = client_id
        self.busy_job: int | None = None
        self.doomed = False  # owner gone or freed while busy: close once the job lets go


class Job:
    def __init__(self, jid: int, kind: str, client: ClientConn, req: dict[str, Any]) -> None:
        self.id = jid
        self.kind = kind
        self.client = client
        self.req = req
        self.cancel = threading.Event()
        self.state = "queued"
        self.slots: list[str] = []  # slots this job holds (inputs and its result slot)
        self.inputs: dict[str, Any] = {}
        self.progress: dict[str, Any] = {}
        self.started = 0.0


class Server:
    def __init__(self, opts: argparse.Namespace, authkey: bytes) -> None:
        self.opts = opts
        self.authkey = authkey
        self.lock = threading.RLock()
        self.stop_event = threading.Event()
        self.stop_reason = ""
        self.clients: dict[int, ClientConn] = {}
        self.slots: dict[str, SlotEntry] = {}
        self.jobs: dict[int, Job] = {}
        self.zombies: list[transport.Slot] = []  # unlinked, waiting for views to die before unmapping
        self.namer = transport.SegmentNamer()
        self._ids = itertools.count(1)
        self._job_ids = itertools.count(1)
        self.render_queue: deque[Job] = deque()
        self.interactive_queue: deque[Job] = deque()
        self.queue_cv = threading.Condition(self.lock)
        self.engines = EngineHolder(opts.models_dir, opts.device)
        self.report = EngineReport(opts.models_dir)
        self.started = time.monotonic()
        self.last_active = time.monotonic()
        self.allowed_roots = [os.path.realpath(os.path.expanduser(r)) for r in opts.allowed_output_root or []] \
            or [os.path.realpath(os.path.expanduser("~")), os.path.realpath(_tempdir())]
        self.address = ""
        self.listener: Any = None

    # ------------------------------------------------------------------------------------------ life

    def serve(self) -> int:
        removed = transport.sweep_dead_segments()
        if removed:
            log.warning("removed %d shared-memory segment(s) left by dead engines", len(removed))
        socket_dir = transport.ensure_private_dir(self.opts.socket_dir or transport.default_socket_dir())
        self.address = self.opts.address or transport.new_address(socket_dir)
        _remove_stale_socket(self.address)
        self.listener = transport.listen(self.address)
        info = {"address": self.address, "pid": os.getpid(), "engine_version": __version__,
                "protocol": PROTOCOL_VERSION}
        conn_file = transport.write_connection_file(socket_dir, {**info, "key": self.authkey.hex()})
        for i in range(self.opts.render_workers):
            threading.Thread(target=self._worker, args=(self.render_queue,), name=f"render-{i}",
                             daemon=True).start()
        threading.Thread(target=self._worker, args=(self.interactive_queue,), name="interactive",
                         daemon=True).start()
        threading.Thread(target=self._accept_loop, name="accept", daemon=True).start()
        threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True).start()
        if self.opts.watch_stdin:
            threading.Thread(target=self._watch_stdin, name="stdin-watch", daemon=True).start()
        sys.stdout.write(json.dumps({"event": "ready", **info}) + "\n")
        sys.stdout.flush()
        log.info("engine %s serving on %s", __version__, self.address)
        try:
            while not self.stop_event.wait(0.25):
                self._housekeeping()
        finally:
            self._shutdown()
            for path in (conn_file, self.address):
                if transport.address_family(path) == "AF_UNIX" or path == conn_file:
                    try:
                        if path != conn_file or transport.read_connection_file(socket_dir)["pid"] == os.getpid():
                            os.unlink(path)
                    except (OSError, ValueError, KeyError):
                        pass
        log.info("engine stopped: %s", self.stop_reason)
        return 0

    def stop(self, reason: str) -> None:
        if not self.stop_event.is_set():
            self.stop_reason = reason
            self.stop_event.set()
            with self.lock:
                self.queue_cv.notify_all()

    def _housekeeping(self) -> None:
        if self.opts.parent_pid and not transport.pid_alive(self.opts.parent_pid):
            self.stop(f"parent process {self.opts.parent_pid} is gone")
        with self.lock:
            busy = bool(self.clients) or any(j.state in ("queued", "running") for j in self.jobs.values())
            if busy:
                self.last_active = time.monotonic()
            self.zombies = [s for s in self.zombies if not s.close()]
        if self.opts.idle_timeout and time.monotonic() - self.last_active > self.opts.idle_timeout:
            self.stop(f"idle for {self.opts.idle_timeout:g} s")

    def _heartbeat_loop(self) -> None:
        # Takes the server lock on purpose: a dispatcher deadlocked on it stops the heartbeats too.
        while not self.stop_event.wait(HEARTBEAT_S):
            with self.lock:
                clients = [c for c in self.clients.values() if c.greeted and c.heartbeat]
            for client in clients:
                client.send_heartbeat()

    def _watch_stdin(self) -> None:
        # Raw fd reads: a daemon thread blocked in sys.stdin's buffered reader aborts interpreter shutdown.
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        self.stop("stdin closed (the client that started the engine is gone)")

    def _shutdown(self) -> None:
        try:
            self.listener.close()
        except Exception:
            pass
        with self.lock:
            clients = list(self.clients.values())
            for job in self.jobs.values():
                job.cancel.set()
        for client in clients:
            client.send(protocol.notice("shutdown", f"engine is shutting down: {self.stop_reason}"))
            client.close()
        deadline = time.monotonic() + 10.0  # a frame in flight finishes or sees the cancel; no partial file
        while time.monotonic() < deadline:
            with self.lock:
                if not any(j.state == "running" for j in self.jobs.values()):
                    break
            time.sleep(0.05)
        with self.lock:
            for name in list(self.slots):
                self._drop_slot(name)
            self.zombies = [s for s in self.zombies if not s.close()]

    # ----------------------------------------------------------------------------------- connections

    def _accept_loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn = self.listener.accept()
            except OSError:
                if self.stop_event.is_set():
                    return
                time.sleep(0.1)  # e.g. out of file descriptors: do not spin
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True, name="conn").start()

    def _serve_connection(self, conn: Any) -> None:
        try:
            transport.authenticate_incoming(conn, self.authkey)
        except Exception as exc:  # wrong key, timeout, garbage instead of an HMAC answer
            log.warning("refused a connection that failed authentication (%s)", type(exc).__name__)
            try:
                conn.close()
            except OSError:
                pass
            return
        client = ClientConn(next(self._ids), transport.Channel(conn))
        with self.lock:
            if self.stop_event.is_set():
                client.close()
                return
            self.clients[client.id] = client
        try:
            self._read_loop(client)
        finally:
            self._disconnect(client)

    def _read_loop(self, client: ClientConn) -> None:
        while client.alive and not self.stop_event.is_set():
            try:
                data = client.channel.recv_bytes()
            except EOFError:
                return
            except OSError as exc:  # oversized frame (framing is lost now) or a reset
                client.send(protocol.reply_error(0, f"connection error: {exc}; closing this connection"))
                return
            rid = 0
            try:
                req = protocol.parse_request(data)
                rid = req["id"]
                result = self._dispatch(client, req)
                if result is _REPLIED:
                    continue
                reply = protocol.reply_ok(rid, result)
            except protocol.ProtocolError as exc:
                reply = protocol.reply_error(exc.request_id, str(exc))
            except (RequestError, settings_schema.SettingsError, transport.SlotError, EngineError) as exc:
                reply = protocol.reply_error(rid, str(exc))
            except Exception as exc:  # a bug: say so, keep serving
                log.error("internal error handling a request:\n%s", traceback.format_exc())
                reply = protocol.reply_error(rid, f"internal engine error: {type(exc).__name__}: {exc}")
            client.send(reply)
            if not client.greeted and reply.get("error", "").startswith("protocol version mismatch"):
                return  # a client that cannot speak our protocol: refused, connection closed
            if reply["ok"] and req["op"] == "shutdown":
                self.stop(f"shutdown requested by client {client.name or client.id}")
                return

    def _disconnect(self, client: ClientConn) -> None:
        client.close()
        with self.lock:
            self.clients.pop(client.id, None)
            for jid in list(client.jobs):
                job = self.jobs.get(jid)
                if job is not None:
                    job.cancel.set()
                    if job.state == "queued":
                        self._finish(job, {"type": "cancelled", "reason": "client disconnected"})
            for name in list(client.slots):
                self._drop_slot(name)
        log.info("client %s disconnected", client.name or client.id)

    # -------------------------------------------------------------------------------------- dispatch

    def _dispatch(self, client: ClientConn, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        if op == "hello":
            if req["protocol"] != PROTOCOL_VERSION:
                raise protocol.ProtocolError(protocol.version_mismatch_message(req["protocol"]), req["id"])
            client.greeted = True
            client.name = req["client"]
            client.pid = req["pid"]
            client.heartbeat = req["heartbeat"]
            return {"protocol": PROTOCOL_VERSION, "engine_version": __version__, "pid": os.getpid(),
                    "capabilities": ["heartbeat"], "heartbeat_s": HEARTBEAT_S,
                    "client_id": client.id, "device": self.opts.device,
                    "allowed_output_roots": self.allowed_roots, "max_slot_bytes": self.opts.max_slot_bytes,
                    **self.report.get()}
        if not client.greeted:
            raise RequestError(f"say 'hello' with protocol {PROTOCOL_VERSION} before '{op}'")
        if op == "ping":
            return {"pong": True}
        if op == "status":
            return self._status(client)
        if op == "shutdown":
            return {"stopping": True}
        if op == "slot_alloc":
            return self._alloc_slot(client, req["nbytes"])
        if op == "slot_free":
            return self._free_slot(client, req["slot"])
        if op == "cancel":
            return self._cancel(client, req["job"])
        return self._submit(client, req)

    def _status(self, client: ClientConn) -> dict[str, Any]:
        report = self.report.get()  # outside the lock: the first call imports onnxruntime
        with self.lock:
            jobs = [{"id": j.id, "kind": j.kind, "state": j.state, "client": j.client.id,
                     "mine": j.client is client, **j.progress}
                    for j in self.jobs.values() if j.state in ("queued", "running")]
            return {"engine_version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                    "device": self.opts.device, "uptime_s": round(time.monotonic() - self.started, 3),
                    "clients": len(self.clients), "jobs": jobs,
                    "slots": {"count": len(self.slots),
                              "bytes": sum(e.slot.capacity for e in self.slots.values()),
                              "mine": sorted(client.slots)},
                    "render_workers": self.opts.render_workers, "allowed_output_roots": self.allowed_roots,
                    **report}

    # ----------------------------------------------------------------------------------------- slots

    def _alloc_slot(self, client: ClientConn, nbytes: int) -> dict[str, Any]:
        slot = self._new_slot(client, nbytes)
        return {"slot": slot.name, "capacity": slot.capacity, "gen": slot.generation}

    def _new_slot(self, client: ClientConn, nbytes: int) -> transport.Slot:
        limit = self.opts.max_slot_bytes
        if nbytes > limit:
            raise RequestError(f"absurd slot size {nbytes} bytes: at most {limit} bytes per slot "
                               "(start the engine with a larger --max-slot-bytes if this is really needed)")
        with self.lock:
            mine = [self.slots[n].slot.capacity for n in client.slots if n in self.slots]
        if len(mine) >= self.opts.max_client_slots:
            raise RequestError(f"this client already holds {len(mine)} slots (at most "
                               f"{self.opts.max_client_slots}); free some with slot_free")
        if sum(mine) + nbytes > self.opts.max_client_bytes:
            raise RequestError(f"this client would hold {sum(mine) + nbytes} bytes of shared memory, over the "
                               f"{self.opts.max_client_bytes}-byte limit; free some slots first")
        free = transport.shm_free_bytes()
        if free is not None and nbytes + transport.HEADER_BYTES > free:
            raise RequestError(f"not enough shared memory for {nbytes} bytes: /dev/shm has {free} bytes free "
                               "(in Docker raise --shm-size)")
        slot = transport.Slot.create(self.namer.next(), nbytes, client_id=client.id)
        with self.lock:
            if not client.alive:
                slot.unlink()
                if not slot.close():
                    self.zombies.append(slot)
                raise RequestError("client disconnected")
            self.slots[slot.name] = SlotEntry(slot, client.id)
            client.slots.add(slot.name)
        return slot

    def _free_slot(self, client: ClientConn, name: str) -> dict[str, Any]:
        with self.lock:
            entry = self._own_slot(client, name)
            if entry.busy_job is not None:
                raise RequestError(f"slot {name} is in use by job {entry.busy_job}; cancel or wait for it first")
            self._drop_slot(name)
        return {"freed": name}

    def _own_slot(self, client: ClientConn, name: str) -> SlotEntry:
        entry = self.slots.get(name)
        if entry is None:
            raise RequestError(f"unknown slot {name!r}: allocate it with slot_alloc first")
        if entry.client_id != client.id:
            raise RequestError(f"slot {name!r} belongs to another client")
        return entry

    def _drop_slot(self, name: str) -> None:
        """Unlink now; unmap now, or once the job using it lets go (lock held)."""
        entry = self.slots.get(name)
        if entry is None:
            return
        entry.slot.unlink()
        client = self.clients.get(entry.client_id)
        if client is not None:
            client.slots.discard(name)
        if entry.busy_job is not None:
            entry.doomed = True
            return
        del self.slots[name]
        if not entry.slot.close():
            self.zombies.append(entry.slot)

    def _release_job_slots(self, job: Job) -> None:
        """Lock held."""
        for name in job.slots:
            entry = self.slots.get(name)
            if entry is None or entry.busy_job != job.id:
                continue
            entry.busy_job = None
            if entry.doomed:
                del self.slots[name]
                if not entry.slot.close():
                    self.zombies.append(entry.slot)
        job.slots = []

    # ------------------------------------------------------------------------------------------ jobs

    def _submit(self, client: ClientConn, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        settings = settings_schema.validate(req.get("settings", {})) if op != "echo" else {}
        if op == "render":
            _ = self._check_output_dir(req["output_dir"])
        with self.lock:
            job = Job(next(self._job_ids), op, client, req)
            try:
                if op == "echo":
                    job.inputs["image"] = self._claim_image(client, job, req["image"])
                else:
                    job.inputs["plate"] = self._claim_image(client, job, req["plate"])
                    job.inputs["sources"] = [self._claim_image(client, job, s) for s in req["sources"]]
                if op in ("preview", "analyse", "echo") and req.get("out_slot"):
                    entry = self._own_slot(client, req["out_slot"])
                    if entry.busy_job is not None and entry.busy_job != job.id:
                        raise RequestError(f"out_slot {req['out_slot']} is in use by job {entry.busy_job}")
                    entry.busy_job = job.id
                    if req["out_slot"] not in job.slots:
                        job.slots.append(req["out_slot"])
            except Exception:
                self._release_job_slots(job)
                raise
            job.inputs["settings"] = settings
            self.jobs[job.id] = job
            client.jobs.add(job.id)
            lane = self.render_queue if op == "render" else self.interactive_queue
            # Reply before any event of the job can be sent, so the client knows the job id first.
            client.send(protocol.reply_ok(req["id"], {"job": job.id, "queued": len(lane) + 1}))
            lane.append(job)
            self.queue_cv.notify_all()
        return _REPLIED

    def _check_output_dir(self, path: str) -> str:
        if not os.path.isabs(path):
            raise RequestError(f"output_dir {path!r} must be an absolute path")
        real = os.path.realpath(path)
        for root in self.allowed_roots:
            try:
                if os.path.commonpath([real, root]) == root:
                    return real
            except ValueError:  # different drives on Windows
                continue
        raise RequestError(f"output_dir {path!r} is outside the allowed output root(s) "
                           f"{', '.join(self.allowed_roots)}; choose a folder under one of them or start "
                           "the engine with --allowed-output-root")

    def _claim_image(self, client: ClientConn, job: Job, ref: dict[str, Any]) -> ImageInput:
        """A file reference as is; a slot reference checked against the slot and marked busy (lock held)."""
        if "path" in ref:
            return ImageInput(path=ref["path"], colorspace=ref["colorspace"], name=ref["name"])
        name = ref["slot"]
        entry = self._own_slot(client, name)
        if entry.busy_job is not None and entry.busy_job != job.id:
            raise RequestError(f"slot {name} is in use by job {entry.busy_job}")
        h, w, c = ref["shape"]
        need = h * w * c * 4
        if need > entry.slot.capacity:
            raise RequestError(f"image of {w}x{h}x{c} {ref['dtype']} needs {need} bytes but slot {name} holds "
                               f"{entry.slot.capacity}")
        entry.slot.check_generation(ref["gen"])
        pixels = entry.slot.array((h, w, c), np.float32)
        pixels.flags.writeable = False
        entry.busy_job = job.id
        if name not in job.slots:
            job.slots.append(name)
        return ImageInput(pixels=pixels, colorspace=ref["colorspace"], name=ref["name"] or f"slot {name}")

    def _cancel(self, client: ClientConn, jid: int) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get(jid)
            if job is None:
                raise RequestError(f"unknown job {jid}")
            if job.client is not client:
                raise RequestError(f"job {jid} belongs to another client")
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
        self._release_job_slots(job)
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
            with self.lock:
                self._finish(job, terminal)

    def _run(self, job: Job) -> dict[str, Any]:
        req, inputs = job.req, job.inputs

        def emit(ev: dict[str, Any]) -> None:
            if ev.get("type") == "progress":
                job.progress = {k: ev.get(k) for k in ("done", "total", "fps", "eta")}
            if not job.client.send(protocol.event(job.id, ev)):
                job.cancel.set()  # nobody is listening any more

        try:
            if job.kind == "render":
                out = run_render(self.engines, req, inputs["plate"], inputs["sources"], inputs["settings"],
                                 emit, job.cancel)
            elif job.kind == "preview":
                out = run_preview(self.engines, req, inputs["plate"], inputs["sources"], inputs["settings"])
            elif job.kind == "analyse":
                out = run_analyse(self.engines, req, inputs["plate"], inputs["settings"])
            else:
                out = run_echo(inputs["image"].pixels)
            if job.cancel.is_set():
                raise JobCancelled()
            result = dict(out.fields)
            if out.layers:
                result.update(self._write_result(job, out))
            return {"type": "done", "seconds": round(time.monotonic() - job.started, 4), "result": result}
        except JobCancelled:
            return {"type": "cancelled"}
        except (EngineError, settings_schema.SettingsError, RequestError, transport.SlotError) as exc:
            return {"type": "error", "message": str(exc)}
        except Exception as exc:
            log.error("job %d (%s) failed:\n%s", job.id, job.kind, traceback.format_exc())
            return {"type": "error", "message": f"internal engine error: {type(exc).__name__}: {exc}"}
        finally:
            inputs.clear()  # drop the slot views before the slots may be unmapped

    def _write_result(self, job: Job, out: JobOutput) -> dict[str, Any]:
        """Copy result layers into the job's out slot (or a new, bigger one) and describe them."""
        table, nbytes = out.layout()
        nbytes = max(nbytes, 1)
        result: dict[str, Any] = {}
        name = job.req.get("out_slot")
        with self.lock:
            entry = self.slots.get(name) if name else None
            if entry is not None and entry.slot.capacity < nbytes:
                result["replaced"] = name
                self._release_one(job, name)
                self._drop_slot(name)
                entry = None
        if entry is None:
            try:
                slot = self._new_slot(job.client, nbytes)
            except RequestError:
                if not job.client.alive:
                    raise JobCancelled() from None  # the client is gone: nobody to report to
                raise
            with self.lock:
                new = self.slots.get(slot.name)
                if new is None:  # the client disconnected just now, and its slots went with it
                    raise JobCancelled()
                new.busy_job = job.id
                job.slots.append(slot.name)
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

    def _release_one(self, job: Job, name: str) -> None:
        entry = self.slots.get(name)
        if entry is not None and entry.busy_job == job.id:
            entry.busy_job = None
        if name in job.slots:
            job.slots.remove(name)


# ---------------------------------------------------------------------------------------------- helpers


def _tempdir() -> str:
    import tempfile

    return tempfile.gettempdir()


def _remove_stale_socket(address: str) -> None:
    if transport.address_family(address) != "AF_UNIX" or not os.path.exists(address):
        return
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(address)
    except OSError:
        os.unlink(address)  # nobody listens: a leftover of a crashed engine
    else:
        raise SystemExit(f"another engine is already listening on {address}")
    finally:
        s.close()


def _read_line_fd0() -> bytes:
    """One line from fd 0, unbuffered, so nothing after it is swallowed (the stdin watcher reads on)."""
    out = bytearray()
    while len(out) < 4096:
        ch = os.read(0, 1)
        if not ch or ch == b"\n":
            break
        out += ch
    return bytes(out)


def _read_key(opts: argparse.Namespace) -> bytes:
    if opts.key_stdin:
        line = _read_line_fd0().strip()
        try:
            return bytes.fromhex(line.decode("ascii"))
        except ValueError:
            raise SystemExit("--key-stdin: the first line of stdin must be the key in hex") from None
    env = os.environ.pop(transport.ENV_KEY, "")
    if env:
        try:
            return bytes.fromhex(env)
        except ValueError:
            raise SystemExit(f"{transport.ENV_KEY} must be the key in hex") from None
    return os.urandom(32)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine serve",
                                description="Run the long-lived engine that the Blender add-on talks to.")
    p.add_argument("--socket-dir", help="private directory for the socket and engine.json "
                   "(created with mode 0700; default: $XDG_RUNTIME_DIR or the temp dir + /facefusion-<uid>)")
    p.add_argument("--address", help="explicit socket path (Windows: pipe name); default: in --socket-dir")
    p.add_argument("--idle-timeout", type=float, default=0.0,
                   help="exit after this many seconds without clients or jobs (0: never)")
    p.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    p.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches EOF (the starter died)")
    p.add_argument("--key-stdin", action="store_true",
                   help=f"read the hex authkey from stdin's first line (else ${transport.ENV_KEY}, else random; "
                   "it is written to engine.json in the socket directory, never shown on a command line)")
    p.add_argument("--models-dir", help="where model files live")
    p.add_argument("--device", default="cpu", help="execution device for the pipeline (cpu, cuda, ...)")
    p.add_argument("--allowed-output-root", action="append", default=[],
                   help="render output folders must be under one of these (repeatable; default: home and temp)")
    p.add_argument("--render-workers", type=int, default=1, help="renders that run at the same time")
    p.add_argument("--max-slot-bytes", type=int, default=DEFAULT_MAX_SLOT_BYTES)
    p.add_argument("--max-client-bytes", type=int, default=DEFAULT_MAX_CLIENT_BYTES)
    p.add_argument("--max-client-slots", type=int, default=DEFAULT_MAX_CLIENT_SLOTS)
    p.add_argument("--log-level", default="WARNING")
    return p


def main(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    logging.basicConfig(level=opts.log_level.upper(), stream=sys.stderr,
                        format="[engine %(process)d] %(levelname)s %(message)s")
    if opts.render_workers < 1:
        raise SystemExit("--render-workers must be at least 1")
    server = Server(opts, _read_key(opts))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: server.stop(f"signal {signum}"))
    return server.serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
