"""The engine client: what the Blender add-on (and farm scripts) use to talk to ``python -m engine serve``.

Standard library plus numpy only (runs in Blender's Python 3.11 with numpy < 2); imports nothing of
the engine's heavy packages. Never touches ``bpy``; it is safe to call from Blender's main thread:
nothing here blocks unless you ask it to (``wait``/``events`` with a timeout), and ``poll_events`` never
blocks, for a modal operator's timer.

Starting or finding an engine::

    from engine.client import EngineClient, ImageRef, EngineDied, JobFailed

    eng = EngineClient.start("/path/to/engine-venv/bin/python",          # the engine's own Python
                             root="/path/to/extension",                   # folder holding engine/
                             allowed_output_roots=["/shots/cache"],       # renders may write only here
                             env={"OCIO": "/blender/datafiles/colormanagement/config.ocio",  # added to
                                  "FACE_FUSION_MODELS_DIR": "/studio/models"})              # os.environ
    # or, an engine already running (standalone: python -m engine serve --socket-dir DIR):
    eng = EngineClient.connect(socket_dir=DIR)        # reads DIR/engine.json (address + key, mode 0600)
    eng.info                                          # {"engine_version", "protocol", "pid", "device",
                                                      #  "providers", "models", "models_known", ...}

An engine started by ``start`` exits when this process dies (its stdin reaches EOF) and on
``eng.close()``. A dead engine is noticed within ~2 s at most (socket EOF, normally at once): every
call, ``wait``, ``events`` and ``poll_events`` then raise ``EngineDied``; ``eng.restart()`` starts a
fresh one (same arguments) or reconnects, and jobs can be submitted again.

An engine that is alive but stuck is noticed too: the client asks for heartbeats in its ``hello`` and
the engine sends one every second, busy or idle (a long frame is not silence). Once heartbeats are
promised (hello reply) or the first one arrived, if nothing at all comes from a living engine process
for ``hung_after`` seconds (``start``/``connect`` parameter, default 30; None or 0: never), the same
calls raise ``EngineHung`` (an ``EngineClientError``, not an ``EngineDied``). ``eng.restart()`` kills
the stuck engine at once and starts a fresh one; ``eng.close()`` kills it too rather than wait for it.
``eng.silent_for`` is the seconds since the engine was last heard from. An older engine without
heartbeats is never declared hung. If the engine recovers (e.g. it was stopped, then continued) before
you restart it, calls simply work again.

Jobs (each returns a ``Job`` at once; nothing blocks until you wait)::

    job = eng.render(plate="/shots/sh010/plate.####.exr",           # str/path, ImageRef, or float32 pixels
                     sources=["/photos/actor.jpg"],
                     output_dir="/shots/cache/3fa2c1d0e5b6a7c8",
                     settings={"face_selector": "largest"},           # engine.settings schema; validated
                     frame_start=1001, frame_end=1100)
    for ev in job.events(timeout=60):   # blocking iterator; ends after the terminal event
        ...                             # ev["type"]: see Events below
    summary = job.wait()                # the "done" event (render); raises JobFailed / JobCancelledError

    prev = eng.preview(plate=pixels, sources=[...], settings=..., frame=1).wait()
    prev.rgba                           # float32 (H, W, 4) linear, what the EXR's RGBA would hold
    prev.mattes                         # {"Face": float32 (H, W), ...}
    faces = eng.analyse(plate=..., frame=1).wait()
    faces[0]["box"], faces[0]["landmarks"], faces[0]["embedding"], faces[0]["thumbnail"]  # uint8 (96,96,3)
    out = eng.echo(pixels)              # round trip through shared memory (tests, benchmark)
    buf = eng.pixel_buffer(h, w, 4)     # float32 array living in shared memory: fill it, pass it as a
    eng.preview(plate=buf, ...)         # plate/source, and it is sent without another copy

    job.cancel()                        # or eng.cancel(job.id); ends with a "cancelled" event
    eng.status()                        # engine-wide: jobs, clients, slots, execution providers available
                                        # ("providers"), installed models ("models": ids, "model_status":
                                        # {id: installed|unverified|missing}, "models_known", "models_dir")
    for job, ev in eng.poll_events():   # non-blocking, all jobs, for a Blender timer
        ...

Images: a ``str``/``os.PathLike`` is a file (or a ``####``/``%04d`` sequence) the engine reads; a numpy
array is pixels (float32 (H, W, 3|4), top row first, scene linear unless ``colorspace`` says otherwise)
that travel in a shared-memory slot; ``ImageRef(path=..., colorspace=...)`` / ``ImageRef(pixels=...,
colorspace=..., name=...)`` say which colour space. A pixel plate is one still image.

Events (dicts, ``ev["type"]``): ``queued`` {position} · ``start`` {total, frame_start, frame_end} ·
``frame_done`` {frame, path, seconds, faces} · ``progress`` {done, total, fps, eta} · ``warning``
{frame, message} · and exactly one terminal event: ``done`` {seconds, result, ...} · ``error``
{message} · ``cancelled``. After it, ``job.done`` is True and ``job.state`` is that type.

Exceptions: ``EngineClientError`` (base) · ``EngineStartError`` (engine did not come up; message has
its output) · ``EngineDied`` (the engine process or connection is gone) · ``EngineHung`` (its process lives but has
sent nothing, not even a heartbeat, for ``hung_after`` seconds; restart it) · ``ProtocolMismatch``
(add-on and engine versions differ) · ``RequestError`` (the engine refused a request; the message names
the problem) · ``JobFailed`` (the job ended with an error) · ``JobCancelledError``.

Threads: one daemon reader thread per client (never keeps the host alive); ``EngineClient`` methods are
thread-safe. Zero-copy results (``copy=False``) are views of a shared-memory slot that the next request
may reuse: copy what you keep.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import PROTOCOL_VERSION, __version__, outputs, protocol, transport

__all__ = [
    "EngineClient", "Job", "ImageRef", "PreviewResult", "EngineClientError", "EngineStartError", "EngineDied",
    "EngineHung", "ProtocolMismatch", "RequestError", "JobFailed", "JobCancelledError",
]

POLL_S = 0.05  # how often blocking waits re-check that the engine is alive
HUNG_AFTER_S = 30.0  # default: a living engine silent this long (no heartbeat either) is stuck


class EngineClientError(Exception):
    """Base of everything this module raises."""


class EngineStartError(EngineClientError):
    """The engine process did not come up (bad Python, missing packages, no socket)."""


class EngineDied(EngineClientError):
    """The engine process or its connection is gone. ``restart()`` the client to go on."""


class EngineHung(EngineClientError):
    """The engine process is alive but has sent nothing (not even a heartbeat) for ``hung_after`` seconds:
    it is stuck. ``restart()`` the client (kills it, starts a fresh one) and submit again."""


class ProtocolMismatch(EngineClientError):
    """The engine speaks another protocol version: install matching add-on and engine."""


class RequestError(EngineClientError):
    """The engine refused a request; the message names the problem."""


class JobFailed(EngineClientError):
    """A job ended with an ``error`` event; the message is the engine's."""


class JobCancelledError(EngineClientError):
    """A job ended because it was cancelled."""


@dataclass
class ImageRef:
    """A file (``path``) or pixels (float32 (H, W, 3|4), top row first) with their colour space."""

    path: str | None = None
    pixels: np.ndarray | None = None
    colorspace: str = "auto"
    name: str = ""


@dataclass
class PreviewResult:
    rgba: np.ndarray  # float32 (H, W, 4), linear: what the EXR's RGBA would hold
    mattes: dict[str, np.ndarray] = field(default_factory=dict)  # float32 (H, W) each
    faces: int = 0
    warnings: list[str] = field(default_factory=list)


class _ClientSlot:
    def __init__(self, slot: transport.Slot) -> None:
        self.slot = slot
        self.busy = False
        self.buffer = False  # handed out by pixel_buffer, not yet submitted
        view = slot.array(1, np.uint8)
        self.payload_address = view.__array_interface__["data"][0]
        del view


class _Pending:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: dict[str, Any] | None = None


class Job:
    """A submitted job. Events arrive in the client's reader thread and wait here until consumed."""

    def __init__(self, client: EngineClient, job_id: int, kind: str, slots: list[str], copy: bool) -> None:
        self.client = client
        self.id = job_id
        self.kind = kind
        self.state = "queued"
        self.error: str | None = None
        self.result: Any = None
        self._slots = slots  # client slots held until the terminal event
        self._copy = copy
        self._events: collections.deque[dict[str, Any]] = collections.deque()
        self._cv = threading.Condition()
        self._terminal: dict[str, Any] | None = None
        self.output_dir: str | None = None  # render jobs

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.kind} {self.state}>"

    @property
    def done(self) -> bool:
        return self._terminal is not None

    def poll(self) -> list[dict[str, Any]]:
        """Events received so far and not yet consumed; never blocks. Raises EngineDied if the engine
        died before the job ended (after returning what had arrived), EngineHung if it is stuck."""
        out = self._drain()
        if not out and self._terminal is None:
            self.client._raise_if_dead()
        return out

    def _drain(self) -> list[dict[str, Any]]:
        with self._cv:
            out = list(self._events)
            self._events.clear()
        if self._terminal is not None:
            self.client._forget(self)
        return out

    def events(self, timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """Yield events until (and including) the terminal one. ``timeout``: the longest wait for any one
        event (TimeoutError); None waits forever. Raises EngineDied if the engine dies first, EngineHung
        if it stops answering (no heartbeat for ``hung_after`` seconds) while its process lives."""
        while True:
            ev = self._next(timeout)
            yield ev
            if ev["type"] in protocol.TERMINAL_EVENTS:
                return

    def _next(self, timeout: float | None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not self._events:
                if self._terminal is None:
                    self.client._raise_if_dead()
                elif not self._events:
                    raise EngineClientError(f"job {self.id}: its events were already consumed")
                left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                if left <= 0:
                    raise TimeoutError(f"job {self.id} ({self.kind}): no event within {timeout} s")
                self._cv.wait(left)
            ev = self._events.popleft()
        if ev["type"] in protocol.TERMINAL_EVENTS:
            self.client._forget(self)
        return ev

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the job ends (consuming its events). Returns the result: render → the ``done``
        event; preview → PreviewResult; analyse → list of face dicts; echo → ndarray."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._terminal is None:
                self.client._raise_if_dead()
                left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
                if left <= 0:
                    raise TimeoutError(f"job {self.id} ({self.kind}) still running after {timeout} s")
                self._cv.wait(left)
            self._events.clear()
        self.client._forget(self)
        return self.outcome()

    def outcome(self) -> Any:
        """The finished job's result; raises JobFailed / JobCancelledError."""
        if self.state == "error":
            raise JobFailed(f"{self.kind} job {self.id} failed: {self.error}")
        if self.state == "cancelled":
            raise JobCancelledError(f"{self.kind} job {self.id} was cancelled")
        return self.result

    def cancel(self) -> None:
        if not self.done:
            self.client.cancel(self.id)

    def _push(self, ev: dict[str, Any]) -> None:  # reader thread
        with self._cv:
            if ev["type"] in protocol.TERMINAL_EVENTS:
                self._terminal = ev
                self.state = ev["type"]
                if self.state == "error":
                    self.error = str(ev.get("message", "unknown error"))
            elif ev["type"] == "start" or (ev["type"] != "queued" and self.state == "queued"):
                self.state = "running"
            self._events.append(ev)
            self._cv.notify_all()


_LIVE_CLIENTS: weakref.WeakSet[EngineClient] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for client in list(_LIVE_CLIENTS):
        try:
            client.close()
        except Exception:
            pass


_PYTHON_VARS = ("PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONEXECUTABLE", "PYTHONUSERBASE", "PYTHONNOUSERSITE")


def _child_env(root: str, extra: dict[str, str] | None) -> dict[str, str]:
    """The engine's environment: this process's, without Blender's own Python settings, plus ``extra``
    (e.g. OCIO, FACE_FUSION_MODELS_DIR). The key never travels here: it goes through stdin."""
    env = dict(os.environ)
    for name, value in (extra or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"env: names and values must be strings, got {name!r}: {value!r}")
        env[name] = value
    for var in _PYTHON_VARS:  # Blender's own Python settings must not leak into the engine's Python,
        env.pop(var, None)  # whether they came from os.environ or from a caller that copied it into ``extra``
    env.pop(transport.ENV_KEY, None)
    env["PYTHONPATH"] = root
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _default_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class EngineClient:
    """A connection to one engine. Make it with ``start`` or ``connect``."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._jobs: dict[int, Job] = {}
        self._slots: dict[str, _ClientSlot] = {}
        self._zombies: list[transport.Slot] = []
        self._channel: transport.Channel | None = None
        self._dead: str | None = None
        self._reader: threading.Thread | None = None
        self._launch: dict[str, Any] | None = None
        self._connect_args: dict[str, Any] | None = None
        self.process: subprocess.Popen | None = None
        self.socket_dir: str | None = None
        self.address: str | None = None
        self.info: dict[str, Any] = {}
        self.client_name = "facefusion"
        self.log_path: str | None = None
        self.hung_after: float | None = HUNG_AFTER_S
        self._last_rx = time.monotonic()  # when anything last arrived from the engine
        self._heartbeats = False  # the engine promised or sent heartbeats: silence means stuck
        _LIVE_CLIENTS.add(self)

    # ------------------------------------------------------------------------------------- start up

    @classmethod
    def start(cls, python: str, *, root: str | None = None, models_dir: str | None = None,
              device: str = "cpu", allowed_output_roots: list[str] | tuple[str, ...] = (),
              render_workers: int = 1, extra_args: list[str] | tuple[str, ...] = (),
              env: dict[str, str] | None = None, log_path: str | None = None, start_timeout: float = 60.0,
              client_name: str = "facefusion", hung_after: float | None = HUNG_AFTER_S) -> EngineClient:
        """Launch ``python -m engine serve`` (cwd and PYTHONPATH = ``root``, the folder holding ``engine/``)
        and connect. The key goes through the engine's stdin, never its command line or environment; the
        engine exits when this process dies. ``env``: variables added to (or replacing) this process's
        environment for the engine, e.g. ``{"OCIO": <Blender's config.ocio>, "FACE_FUSION_MODELS_DIR": ...}``
        (Blender's PYTHONHOME/PYTHONPATH/PYTHONSTARTUP are never passed on). ``log_path``: the engine's
        stderr (default: this process's stderr). A failed start leaves no process and no folder behind.
        ``hung_after``: seconds of silence (no heartbeat) from a living engine before calls raise EngineHung."""
        self = cls()
        self.client_name = client_name
        self.hung_after = hung_after
        self._launch = {"python": python, "root": root or _default_root(), "models_dir": models_dir,
                        "device": device, "allowed_output_roots": list(allowed_output_roots),
                        "render_workers": render_workers, "extra_args": list(extra_args),
                        "env": dict(env) if env else None,
                        "log_path": log_path, "start_timeout": start_timeout}
        self._spawn()
        return self

    @classmethod
    def connect(cls, socket_dir: str | None = None, *, address: str | None = None, authkey: bytes | None = None,
                client_name: str = "facefusion", hung_after: float | None = HUNG_AFTER_S) -> EngineClient:
        """Connect to a running engine: by its socket directory (reads engine.json) or address + key.
        ``hung_after``: as for ``start``."""
        self = cls()
        self.client_name = client_name
        self.hung_after = hung_after
        self._connect_args = {"socket_dir": socket_dir, "address": address, "authkey": authkey}
        self._connect_existing()
        return self

    def _connect_existing(self) -> None:
        args = self._connect_args or {}
        address, key = args.get("address"), args.get("authkey")
        if address is None or key is None:
            sdir = args.get("socket_dir") or transport.default_socket_dir()
            try:
                info = transport.read_connection_file(sdir)
            except (OSError, ValueError) as exc:
                raise EngineClientError(f"no running engine found in {sdir} ({exc}); start one with "
                                        "'python -m engine serve' or EngineClient.start()") from None
            address = address or info["address"]
            key = key or bytes.fromhex(info["key"])
            self.socket_dir = sdir
        self._open(address, key)

    def _spawn(self) -> None:
        self.socket_dir = tempfile.mkdtemp(prefix="ffe-")  # mode 0700; holds engine.json with the key
        try:
            self._spawn_in(self.socket_dir)
        except BaseException:
            # Nothing of a failed start may stay behind: not the process, not the folder with the key.
            self._close_channel()
            if self.process is not None:
                try:
                    if self.process.stdin:
                        self.process.stdin.close()
                except OSError:
                    pass
                self._kill_process()
                self.process = None
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None
            raise

    def _spawn_in(self, socket_dir: str) -> None:
        opts = self._launch
        assert opts is not None
        key = os.urandom(32)
        cmd = [opts["python"], "-m", "engine", "serve", "--socket-dir", socket_dir, "--key-stdin",
               "--watch-stdin", "--device", opts["device"], "--render-workers", str(opts["render_workers"])]
        if sys.platform != "win32":
            cmd += ["--parent-pid", str(os.getpid())]
        if opts["models_dir"]:
            cmd += ["--models-dir", opts["models_dir"]]
        for root in opts["allowed_output_roots"]:
            cmd += ["--allowed-output-root", str(root)]
        cmd += opts["extra_args"]
        env = _child_env(opts["root"], opts["env"])
        self.log_path = opts["log_path"]
        stderr = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115 (handed to Popen)
        flags = 0x08000000 if sys.platform == "win32" else 0  # CREATE_NO_WINDOW
        try:
            self.process = subprocess.Popen(cmd, cwd=opts["root"], env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=stderr, creationflags=flags)
        except OSError as exc:
            raise EngineStartError(f"cannot run the engine's Python {opts['python']!r}: {exc}") from None
        finally:
            if stderr is not None:
                stderr.close()
        proc = self.process
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(key.hex().encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            pass  # it died already; reported below
        ready: list[dict[str, Any]] = []
        got = threading.Event()
        threading.Thread(target=_drain_stdout, args=(proc.stdout, ready, got), daemon=True,
                         name="engine-stdout").start()
        deadline = time.monotonic() + opts["start_timeout"]
        while not got.wait(0.05):
            if proc.poll() is not None:
                raise EngineStartError(f"the engine exited during start-up with code {proc.returncode}"
                                       f"{self._log_hint()}")
            if time.monotonic() > deadline:
                raise EngineStartError(f"the engine did not start within {opts['start_timeout']:g} s"
                                       f"{self._log_hint()}")
        if not ready:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                raise EngineStartError("the engine closed its output without saying it was ready"
                                       f"{self._log_hint()}") from None
            raise EngineStartError(f"the engine exited during start-up with code {code}{self._log_hint()}")
        self._open(ready[0]["address"], key)

    def _log_hint(self) -> str:
        return f"; see {self.log_path}" if self.log_path else "; see the console for its messages"

    def _open(self, address: str, key: bytes) -> None:
        try:
            self._channel = transport.connect(address, key)
        except Exception as exc:
            raise EngineClientError(f"cannot connect to the engine at {address}: {type(exc).__name__}: "
                                    f"{exc}") from None
        self.address = address
        self._dead = None
        self._heartbeats = False
        self._last_rx = time.monotonic()
        self._reader = threading.Thread(target=self._read_loop, args=(self._channel,), daemon=True,
                                        name="engine-reader")
        self._reader.start()
        try:
            self.info = self._request("hello", timeout=30.0, protocol=PROTOCOL_VERSION, client=self.client_name,
                                      pid=os.getpid(), engine_version=__version__, heartbeat=True)
            if self.info.get("heartbeat_s"):
                self._heartbeats = True  # promised: silence from now on means stuck
        except (RequestError, EngineDied) as exc:
            self._close_channel()
            if "protocol version mismatch" in str(exc):  # refused by the engine, or the engine is other
                raise ProtocolMismatch(str(exc)) from None
            raise

    def restart(self) -> EngineClient:
        """After EngineDied (or any time): drop everything of the old engine, start or reconnect again."""
        self.close(shutdown=True)
        self._dead = None
        _LIVE_CLIENTS.add(self)
        if self._launch is not None:
            self._spawn()
        else:
            self._connect_existing()
        return self

    def close(self, shutdown: bool | None = None) -> None:
        """Disconnect. ``shutdown``: also stop the engine (default: only an engine this client started)."""
        if shutdown is None:
            shutdown = self.process is not None
        if self.process is not None and self._hung_reason() is not None:
            self._kill_hung()
            shutdown = False
        if shutdown and self._channel is not None and self._dead is None:
            try:
                self._request("shutdown", timeout=5.0)
            except EngineClientError:
                pass
        self._close_channel()
        self._fail_all("the client closed its connection to the engine")
        if self.process is not None:
            try:
                if self.process.stdin:
                    self.process.stdin.close()  # the engine exits on stdin EOF
            except OSError:
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill_process()
            self._cleanup_dead_engine()
            self.process = None
            if self.socket_dir:  # the private directory made for this engine
                shutil.rmtree(self.socket_dir, ignore_errors=True)
        self._release_slots()
        _LIVE_CLIENTS.discard(self)

    def _kill_hung(self) -> None:
        """A stuck engine would neither answer 'shutdown' nor notice its stdin closing: kill it, then remove
        its temporary files from the output folders of unfinished jobs (never other hosts' files)."""
        assert self.process is not None
        pid = self.process.pid
        self._kill_process()
        if transport.pid_alive(pid):
            return
        with self._lock:
            dirs = {j.output_dir for j in self._jobs.values() if j.output_dir and not j.done}
        for d in dirs:
            outputs.sweep_partials(d, dead_pid=pid)

    def _kill_process(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def _close_channel(self) -> None:
        channel, self._channel = self._channel, None  # first, so the reader does not report a death
        if channel is not None:
            transport.shutdown_connection(channel.conn)
            channel.close()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
        self._reader = None
        self._channel = None

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --------------------------------------------------------------------------------------- liveness

    @property
    def alive(self) -> bool:
        return self._dead is None and self._channel is not None

    @property
    def pid(self) -> int | None:
        return self.info.get("pid")

    @property
    def silent_for(self) -> float:
        """Seconds since anything (a reply, an event, a heartbeat) last arrived from the engine."""
        return time.monotonic() - self._last_rx

    def _raise_if_dead(self) -> None:
        if self._dead is not None:
            raise EngineDied(self._dead)
        channel = self._channel
        if channel is None:
            raise EngineDied("not connected to an engine")
        reason = self._hung_reason(channel)
        if reason is not None:
            raise EngineHung(reason)

    def _hung_reason(self, channel: transport.Channel | None = None) -> str | None:
        """Why the engine counts as stuck, or None: heartbeats were promised, nothing arrived for
        ``hung_after`` seconds, nothing waits unread, and its process is still alive."""
        limit = self.hung_after
        if not limit or not self._heartbeats or self._dead is not None:
            return None
        silent = time.monotonic() - self._last_rx
        if silent <= limit:
            return None
        channel = channel or self._channel
        try:
            if channel is not None and channel.poll(0):
                return None  # data waits: our reader is behind (this process was busy), not the engine
        except (OSError, ValueError, EOFError):
            return None  # the connection is going away: EngineDied follows
        pid = self.process.pid if self.process is not None else self.info.get("pid")
        if self.process is not None:
            if self.process.poll() is not None:
                return None
        elif pid is None or not transport.pid_alive(pid):
            return None
        if self.process is not None or self._launch is not None:
            what = "restart it (EngineClient.restart) and bake again"
        else:
            what = (f"restart that engine (kill process {pid} and run 'python -m engine serve' again), then "
                    "reconnect (EngineClient.restart) and bake again")
        return (f"the engine (pid {pid}) has not answered for {silent:.0f} s although its process is alive "
                f"(no heartbeat either; limit {limit:g} s); it may be stuck — {what}")

    def _read_loop(self, channel: transport.Channel) -> None:
        reason = "the engine closed the connection"
        try:
            while True:
                data = channel.recv_bytes()
                self._last_rx = time.monotonic()  # anything counts, even a message we cannot read
                try:
                    msg = protocol.parse_incoming(data)
                except protocol.ProtocolError as exc:
                    reason = f"the engine sent an invalid message ({exc})"
                    break
                self._handle(msg)
                if msg["kind"] == "notice" and msg["notice"].get("type") == "shutdown":
                    reason = str(msg["notice"].get("message", "the engine shut down"))
        except (EOFError, OSError):
            pass
        if channel is self._channel:
            self._on_death(reason)

    def _on_death(self, reason: str) -> None:
        if self.process is not None:
            try:
                code = self.process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                code = None
            if code is not None:
                how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                reason = f"the engine (pid {self.process.pid}) {how}{self._log_hint()}"
        # Clean up first, so whoever is told "EngineDied" finds no leftover segment or partial file.
        pid = self.info.get("pid")
        self._cleanup_dead_engine()
        with self._lock:
            dirs = {j.output_dir for j in self._jobs.values() if j.output_dir and not j.done}
        if pid is not None and not transport.pid_alive(pid):
            for d in dirs:
                # Only the dead engine's own temporary files: other hosts (render farm) may share the folder.
                outputs.sweep_partials(d, dead_pid=pid)
        self._dead = reason
        self._fail_all(reason)

    def _fail_all(self, reason: str) -> None:
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            jobs = list(self._jobs.values())
        for p in pending:
            p.event.set()
        for job in jobs:
            with job._cv:
                job._cv.notify_all()

    def _cleanup_dead_engine(self) -> None:
        """The engine is gone: unlink its segments we know (its tracker may have died with it)."""
        pid = self.info.get("pid")
        if pid is None or transport.pid_alive(pid):
            return
        with self._lock:
            for name in self._slots:
                transport.unlink_segment(name)
        self._release_slots()

    def _release_slots(self) -> None:
        with self._lock:
            slots = list(self._slots.values())
            self._slots.clear()
            self._zombies = [s for s in self._zombies if not s.close()]
            for cs in slots:
                if not cs.slot.close():
                    self._zombies.append(cs.slot)

    # ---------------------------------------------------------------------------------------- messages

    def _handle(self, msg: dict[str, Any]) -> None:  # reader thread
        kind = msg["kind"]
        if kind == "reply":
            with self._lock:
                pending = self._pending.pop(msg["id"], None)
                if isinstance(pending, _JobPending) and msg["ok"]:
                    # Register the job before reading on: its events follow right behind this reply.
                    job = Job(self, int(msg["result"]["job"]), pending.op, pending.held, pending.copy)
                    pending.job = job
                    self._jobs[job.id] = job
            if pending is not None:
                pending.reply = msg
                pending.event.set()
        elif kind == "notice":
            if msg["notice"]["type"] == "heartbeat":
                self._heartbeats = True
        elif kind == "event":
            with self._lock:
                job = self._jobs.get(msg["job"])
            if job is None:
                return
            ev = msg["event"]
            if ev["type"] in protocol.TERMINAL_EVENTS:
                ev = self._finish_job(job, ev)
            job._push(ev)

    def _send(self, op: str, **fields: Any) -> _Pending:
        with self._lock:
            self._raise_if_dead()
            rid = next(self._ids)
            pending = _Pending()
            self._pending[rid] = pending
            channel = self._channel
        assert channel is not None
        try:
            channel.send(protocol.request(op, rid, **fields))
        except (OSError, ValueError) as exc:
            with self._lock:
                self._pending.pop(rid, None)
            raise EngineDied(self._dead or f"cannot send to the engine: {exc}") from None
        return pending

    def _request(self, op: str, timeout: float | None = 30.0, **fields: Any) -> dict[str, Any]:
        pending = self._send(op, **fields)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not pending.event.wait(POLL_S):
            self._raise_if_dead()
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the engine did not answer '{op}' within {timeout} s")
        if pending.reply is None:
            self._raise_if_dead()
            raise EngineDied("the engine went away before answering")
        if not pending.reply["ok"]:
            raise RequestError(f"{op}: {pending.reply.get('error', 'refused')}")
        return pending.reply.get("result") or {}

    def _send_nowait(self, op: str, **fields: Any) -> None:
        """Fire and forget (from the reader thread, which must never wait for a reply)."""
        with self._lock:
            if self._dead is not None or self._channel is None:
                return
            rid = next(self._ids)
            channel = self._channel
        try:
            channel.send(protocol.request(op, rid, **fields))
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------------------------------- slots

    def _acquire_slot(self, nbytes: int, exclude: set[str]) -> _ClientSlot:
        with self._lock:
            fits = [cs for name, cs in self._slots.items()
                    if not cs.busy and name not in exclude and cs.slot.capacity >= nbytes]
            if fits:
                cs = min(fits, key=lambda c: c.slot.capacity)
                cs.busy = True
                return cs
        reply = self._request("slot_alloc", nbytes=nbytes)
        cs = _ClientSlot(self._attach(reply["slot"]))
        cs.busy = True
        with self._lock:
            self._slots[cs.slot.name] = cs
        return cs

    def _attach(self, name: str) -> transport.Slot:
        try:
            return transport.Slot.attach(name)
        except transport.SlotError as exc:
            raise EngineClientError(str(exc)) from None

    def pixel_buffer(self, height: int, width: int, channels: int = 4) -> np.ndarray:
        """A float32 (height, width, channels) array that lives in a shared-memory slot. Fill it (e.g.
        ``image.pixels.foreach_get(buf.ravel())`` then flip rows) and pass it as a plate or source: it
        is sent without another copy. One submission per buffer; ask for a new one for the next job."""
        nbytes = height * width * channels * 4
        cs = self._acquire_slot(nbytes, set())
        cs.buffer = True
        return cs.slot.array((height, width, channels), np.float32)

    def _buffer_slot(self, pixels: np.ndarray) -> _ClientSlot | None:
        """The slot whose payload ``pixels`` is (a ``pixel_buffer``), or None."""
        if not pixels.flags.c_contiguous:
            return None
        addr = pixels.__array_interface__["data"][0]
        with self._lock:
            for cs in self._slots.values():
                if cs.buffer and cs.payload_address == addr and pixels.nbytes <= cs.slot.capacity:
                    cs.buffer = False  # handed to this job; released with it
                    return cs
        return None

    def _result_slot(self, exclude: set[str]) -> str | None:
        """A free slot for the engine to write a result into (the largest), or None (engine makes one)."""
        with self._lock:
            free = [cs for name, cs in self._slots.items() if not cs.busy and name not in exclude]
            if not free:
                return None
            cs = max(free, key=lambda c: c.slot.capacity)
            cs.busy = True
            return cs.slot.name

    def _forget(self, job: Job) -> None:
        """A finished job whose events were consumed: the client no longer tracks it."""
        with self._lock:
            self._jobs.pop(job.id, None)

    def _release(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                cs = self._slots.get(name)
                if cs is not None:
                    cs.busy = False

    def _image(self, image: Any, held: list[str], what: str) -> dict[str, Any]:
        if isinstance(image, ImageRef):
            ref = image
        elif isinstance(image, np.ndarray):
            ref = ImageRef(pixels=image)
        elif isinstance(image, (str, os.PathLike)):
            ref = ImageRef(path=os.fspath(image))
        else:
            raise TypeError(f"{what} must be a path, a numpy array or an ImageRef, not {type(image).__name__}")
        if ref.pixels is None:
            if not ref.path:
                raise ValueError(f"{what}: an ImageRef needs a path or pixels")
            return {"path": os.path.abspath(ref.path), "colorspace": ref.colorspace, "name": ref.name}
        pixels = np.asarray(ref.pixels)
        if pixels.ndim != 3 or pixels.shape[2] not in (3, 4):
            raise ValueError(f"{what}: pixels must be (height, width, 3 or 4), got shape {pixels.shape}")
        if pixels.dtype != np.float32:
            pixels = pixels.astype(np.float32)
        cs = self._buffer_slot(pixels)
        if cs is None:
            cs = self._acquire_slot(pixels.nbytes, set(held))
            cs.slot.write(pixels)
        held.append(cs.slot.name)
        gen = cs.slot.bump()
        return {"slot": cs.slot.name, "gen": gen, "shape": list(pixels.shape), "dtype": "float32",
                "colorspace": ref.colorspace, "name": ref.name}

    # -------------------------------------------------------------------------------------------- jobs

    def _finish_job(self, job: Job, ev: dict[str, Any]) -> dict[str, Any]:  # reader thread
        held, job._slots = job._slots, []
        result = ev.get("result") or {}
        try:
            if ev["type"] == "done":
                job.result = self._materialise(job, result) if job.kind != "render" else ev
        except (EngineClientError, transport.SlotError, protocol.ProtocolError) as exc:
            ev = {"type": "error", "message": f"cannot read the result: {exc}"}
        finally:
            replaced = result.get("replaced")
            if replaced:
                with self._lock:
                    cs = self._slots.pop(replaced, None)
                if cs is not None and not cs.slot.close():
                    self._zombies.append(cs.slot)
            self._release(held + ([result["slot"]] if result.get("slot") else []))
            with self._lock:
                # Keep at most a few idle slots; give back the smallest extras.
                idle = sorted((cs for cs in self._slots.values() if not cs.busy), key=lambda c: c.slot.capacity)
                extras = idle[:-4] if len(idle) > 4 else []
                for cs in extras:
                    self._slots.pop(cs.slot.name, None)
                    if not cs.slot.close():
                        self._zombies.append(cs.slot)
            for cs in extras:
                self._send_nowait("slot_free", slot=cs.slot.name)
        return ev

    def _materialise(self, job: Job, result: dict[str, Any]) -> Any:
        layers: dict[str, np.ndarray] = {}
        if result.get("slot"):
            name = result["slot"]
            with self._lock:
                cs = self._slots.get(name)
            if cs is None:
                cs = _ClientSlot(self._attach(name))
                with self._lock:
                    self._slots[name] = cs
            cs.slot.check_generation(int(result["gen"]))
            for layer in protocol.check_layers(result, cs.slot.capacity):
                view = cs.slot.array(layer["shape"], layer["dtype"], layer["offset"])
                layers[layer["name"]] = view.copy() if job._copy else view
                del view
        if job.kind == "echo":
            return layers["rgba"]
        if job.kind == "preview":
            mattes = {k[len("matte."):]: v for k, v in layers.items() if k.startswith("matte.")}
            return PreviewResult(rgba=layers["rgba"], mattes=mattes, faces=int(result.get("faces", 0)),
                                 warnings=list(result.get("warnings", [])))
        faces = []
        for face in result.get("faces", []):
            face = dict(face)
            thumb = face.pop("thumbnail_layer", None)
            if thumb is not None and thumb in layers:
                face["thumbnail"] = layers[thumb]
            faces.append(face)
        return faces

    def _submit_with(self, op: str, held: list[str], copy: bool, **fields: Any) -> Job:
        with self._lock:
            self._raise_if_dead()
            rid = next(self._ids)
            pending = _JobPending(self, op, held, copy)
            self._pending[rid] = pending
            channel = self._channel
        assert channel is not None
        try:
            try:
                channel.send(protocol.request(op, rid, **fields))
            except (OSError, ValueError) as exc:
                raise EngineDied(self._dead or f"cannot send to the engine: {exc}") from None
            while not pending.event.wait(POLL_S):
                self._raise_if_dead()
            if pending.reply is None:
                self._raise_if_dead()
                raise EngineDied("the engine went away before answering")
            if not pending.reply["ok"]:
                raise RequestError(f"{op}: {pending.reply.get('error', 'refused')}")
        except BaseException:
            with self._lock:
                self._pending.pop(rid, None)
            self._release(held)
            raise
        assert pending.job is not None
        return pending.job

    def _submit_job(self, op: str, build: Any, copy: bool = True, result_slot: bool = False) -> Job:
        """Submit ``op`` with the fields ``build(held)`` makes (it puts pixels into slots, listed in ``held``),
        plus a slot for the result where the reply carries pixels; slots are released if anything fails."""
        held: list[str] = []
        try:
            fields = build(held)
            if result_slot:
                fields["out_slot"] = self._result_slot(set(held))
                if fields["out_slot"]:
                    held.append(fields["out_slot"])
        except BaseException:
            self._release(held)
            raise
        return self._submit_with(op, held, copy, **fields)

    def _images(self, plate: Any, sources: list[Any], held: list[str]) -> dict[str, Any]:
        return {"plate": self._image(plate, held, "plate"),
                "sources": [self._image(s, held, f"sources[{i}]") for i, s in enumerate(sources)]}

    def render(self, plate: Any, sources: list[Any], output_dir: str, settings: dict[str, Any] | None = None,
               frame_start: int | None = None, frame_end: int | None = None, *, skip_existing: bool = False,
               file_prefix: str = "facefusion") -> Job:
        """Render frames of ``plate`` into one EXR per frame in ``output_dir`` (must be under an allowed
        output root of the engine). Events: start, frame_done, progress, warning, then done/error/cancelled."""
        out = os.path.abspath(os.fspath(output_dir))
        job = self._submit_job("render", lambda held: {
            **self._images(plate, sources, held), "output_dir": out, "settings": dict(settings or {}),
            "frame_start": frame_start, "frame_end": frame_end, "skip_existing": skip_existing,
            "file_prefix": file_prefix})
        job.output_dir = out
        return job

    def preview(self, plate: Any, sources: list[Any], frame: int, settings: dict[str, Any] | None = None,
                *, copy: bool = True) -> Job:
        """One frame swapped, back as pixels (no file). ``job.wait()`` → PreviewResult."""
        return self._submit_job("preview", lambda held: {**self._images(plate, sources, held), "frame": int(frame),
                                                      "settings": dict(settings or {})}, copy, result_slot=True)

    def analyse(self, plate: Any, frame: int, settings: dict[str, Any] | None = None) -> Job:
        """The faces in one frame. ``job.wait()`` → [{"index", "box", "landmarks", "embedding", "thumbnail"}]."""
        return self._submit_job("analyse", lambda held: {"plate": self._image(plate, held, "plate"),
                                                      "frame": int(frame), "settings": dict(settings or {})},
                             result_slot=True)

    def submit_echo(self, pixels: np.ndarray, *, copy: bool = True) -> Job:
        return self._submit_job("echo", lambda held: {"image": self._image(pixels, held, "image")}, copy,
                             result_slot=True)

    def echo(self, pixels: np.ndarray, *, copy: bool = True, timeout: float | None = 60.0) -> np.ndarray:
        """Send pixels through shared memory and get the engine's unchanged copy back. ``copy=False`` returns
        a view of the result slot, valid until the next request."""
        return self.submit_echo(pixels, copy=copy).wait(timeout)

    def cancel(self, job_id: int) -> dict[str, Any]:
        return self._request("cancel", job=int(job_id))

    def status(self) -> dict[str, Any]:
        return self._request("status")

    def ping(self, timeout: float = 5.0) -> float:
        t0 = time.perf_counter()
        self._request("ping", timeout=timeout)
        return time.perf_counter() - t0

    def shutdown(self) -> None:
        """Ask the engine to stop (cancels every client's jobs)."""
        self.close(shutdown=True)

    def poll_events(self) -> list[tuple[Job, dict[str, Any]]]:
        """Every job's new events, without blocking (for a modal operator's timer). Raises EngineDied
        once the engine is gone and everything it sent has been returned; EngineHung while it is stuck."""
        with self._lock:
            jobs = list(self._jobs.values())
        out = []
        for job in jobs:
            out.extend((job, ev) for ev in job._drain())
        if not out:
            self._raise_if_dead()
        return out


class _JobPending(_Pending):
    """A job request's reply: the reader thread makes the Job as the reply lands, before its events."""

    def __init__(self, client: EngineClient, op: str, held: list[str], copy: bool) -> None:
        super().__init__()
        self.client, self.op, self.held, self.copy = client, op, held, copy
        self.job: Job | None = None


def _drain_stdout(stream: Any, ready: list[dict[str, Any]], got: threading.Event) -> None:
    """Read the engine's stdout: the first JSON ``ready`` line, then discard (so it never blocks)."""
    try:
        for line in stream:
            if not got.is_set():
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and msg.get("event") == "ready":
                    ready.append(msg)
                    got.set()
    except (OSError, ValueError):
        pass
    finally:
        got.set()
