"""The engine server: life cycle, connections and dispatch of ``python -m engine serve``.

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
import stat
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from typing import Any

from .. import PROTOCOL_VERSION, __version__, protocol, transport
from .. import settings as settings_schema
from ..errors import EngineError
from .connections import ClientConn, Refused, remove_stale_socket
from .jobs import EngineHolder, EngineReport
from .queue import LIVE_STATES, REPLIED, Job, JobQueue

log = logging.getLogger("engine.server")

HEARTBEAT_S = 1.0  # seconds between heartbeat notices to clients that asked for them


class Server(JobQueue):
    """One engine: its clients, slots and jobs, the workers, and the threads that keep it honest."""

    def __init__(self, opts: argparse.Namespace, authkey: bytes) -> None:
        self.opts = opts
        self.authkey = authkey
        self.lock = threading.RLock()
        self.stop_event = threading.Event()
        self.stop_reason = ""
        self.clients: dict[int, ClientConn] = {}
        self.slots = transport.SlotPool()  # every segment made for a client, and the job holding it
        self.jobs: dict[int, Job] = {}
        self.namer = transport.SegmentNamer()
        self._ids = itertools.count(1)
        self._job_ids = itertools.count(1)
        self.render_queue: deque[Job] = deque()
        self.interactive_queue: deque[Job] = deque()
        self.queue_cv = threading.Condition(self.lock)
        self.engines = EngineHolder(opts.models_dir, opts.device, opts.render_workers)
        self.report = EngineReport(opts.models_dir)
        self.started = time.monotonic()
        self.last_active = time.monotonic()
        self.allowed_roots = [os.path.realpath(os.path.expanduser(r)) for r in opts.allowed_output_root or []] \
            or [os.path.realpath(os.path.expanduser("~")), os.path.realpath(tempfile.gettempdir())]
        self.address = ""
        self.listener: Any = None

    # ------------------------------------------------------------------------------------------ life

    def serve(self) -> int:
        removed = transport.sweep_dead_segments()
        if removed:
            log.warning("removed %d shared-memory segment(s) left by dead engines", len(removed))
        socket_dir = transport.ensure_private_dir(self.opts.socket_dir or transport.default_socket_dir())
        self.address = self.opts.address or transport.new_address(socket_dir)
        remove_stale_socket(self.address)
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
                        if path == conn_file and transport.read_connection_file(socket_dir)["pid"] == os.getpid() \
                                or path != conn_file and stat.S_ISSOCK(os.lstat(path).st_mode):  # unlink only sockets
                            os.unlink(path)
                    except (OSError, ValueError, KeyError):
                        pass
            if self.opts.remove_socket_dir:  # the folder a client made for this engine alone: gone once empty
                try:
                    os.rmdir(socket_dir)
                except OSError:
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
            busy = bool(self.clients) or any(j.state in LIVE_STATES for j in self.jobs.values())
            if busy:
                self.last_active = time.monotonic()
        self.slots.reap()
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
            transport.close_listener(self.listener)
        except Exception:
            pass
        with self.lock:
            for job in self.jobs.values():
                job.cancel.set()
        deadline = time.monotonic() + 10.0  # a frame in flight finishes or sees the cancel; no partial file
        while time.monotonic() < deadline:
            with self.lock:
                if not any(j.state == "running" for j in self.jobs.values()):
                    break
            time.sleep(0.05)
        with self.lock:
            # Every job not ended yet (queued, or a frame that did not finish in time) gets its terminal event
            # before the connections close, so no client waits on it.
            for job in list(self.jobs.values()):
                self._finish(job, self._shutdown_error())
            clients = list(self.clients.values())
        for client in clients:
            client.send(protocol.notice("shutdown", f"engine is shutting down: {self.stop_reason}"))
            client.close()
        deadline = time.monotonic() + 5.0  # a client that stopped reading does not hold the exit up for long
        for client in clients:
            client.join(max(0.0, deadline - time.monotonic()))
        with self.lock:
            for name in list(self.slots):
                self._drop_slot(name)
        self.slots.reap()

    def _shutdown_error(self) -> dict[str, Any]:
        return {"type": "error", "message": f"the engine shut down before the job ended ({self.stop_reason}); "
                                           "frames already written are kept, submit the job again"}

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
        self.last_active = time.monotonic()  # stamped here, not sampled: a short connection is activity too
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
            self.last_active = time.monotonic()
            rid = 0
            try:
                req = protocol.parse_request(data)
                rid = req["id"]
                result = self._dispatch(client, req)
                if result is REPLIED:
                    continue
                reply = protocol.reply_ok(rid, result)
            except protocol.ProtocolError as exc:
                reply = protocol.reply_error(exc.request_id, str(exc))
            except (Refused, settings_schema.SettingsError, transport.SlotError, EngineError) as exc:
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
        self.last_active = time.monotonic()
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
            if type(req["protocol"]) is not int or req["protocol"] != PROTOCOL_VERSION:  # true == 1.0 == 1
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
            raise Refused(f"say 'hello' with protocol {PROTOCOL_VERSION} before '{op}'")
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
                    for j in self.jobs.values() if j.state in LIVE_STATES]
            return {"engine_version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                    "device": self.opts.device, "uptime_s": round(time.monotonic() - self.started, 3),
                    "clients": len(self.clients), "jobs": jobs,
                    "slots": {"count": len(self.slots), "bytes": self.slots.nbytes,
                              "mine": sorted(client.slots)},
                    "render_workers": self.opts.render_workers, "allowed_output_roots": self.allowed_roots,
                    **report}
