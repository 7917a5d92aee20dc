"""Starting, finding and stopping the engine process, and telling whether it is alive, dead or stuck."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import Any

from .. import outputs, transport
from .errors import EngineClientError, EngineDied, EngineHung, EngineStartError
from .state import HUNG_AFTER_S, ClientState

_LIVE_CLIENTS: weakref.WeakSet[EngineProcess] = weakref.WeakSet()  # closed at exit, engines stopped


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
    """The folder holding ``engine/`` (this file is engine/client/process.py)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



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


class EngineProcess(ClientState):
    """The engine this client started (or connected to): its life and its liveness."""

    def __init__(self) -> None:
        super().__init__()
        _LIVE_CLIENTS.add(self)

    # ------------------------------------------------------------------------------------- start up

    @classmethod
    def start(cls, python: str, *, root: str | None = None, models_dir: str | None = None,
              device: str = "cpu", allowed_output_roots: list[str] | tuple[str, ...] = (),
              render_workers: int = 1, extra_args: list[str] | tuple[str, ...] = (),
              env: dict[str, str] | None = None, log_path: str | None = None, start_timeout: float = 60.0,
              client_name: str = "facefusion", hung_after: float | None = HUNG_AFTER_S) -> Any:
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
                client_name: str = "facefusion", hung_after: float | None = HUNG_AFTER_S) -> Any:
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
        # --remove-socket-dir: the engine removes the folder when it exits, even after this process was killed.
        cmd = [opts["python"], "-m", "engine", "serve", "--socket-dir", socket_dir, "--key-stdin",
               "--remove-socket-dir", "--watch-stdin", "--device", opts["device"],
               "--render-workers", str(opts["render_workers"])]
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

    def restart(self) -> Any:
        """After EngineDied (or any time): drop everything of the old engine, start or reconnect again. Jobs of
        the old engine end (their ``wait()`` raises EngineDied); submit them again."""
        self._fail_all("the engine was restarted (EngineClient.restart)")
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
            dirs = {j.output_dir for j in self._jobs.values() if j.output_dir and (not j.done or j.lost)}
        for d in dirs:
            outputs.sweep_partials(d, dead_pid=pid)

    def _kill_process(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


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
            dirs = {j.output_dir for j in self._jobs.values() if j.output_dir and (not j.done or j.lost)}
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
            job._lose(reason)  # a terminal event: wait() ends even once a restarted engine is alive

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
            self._buffers.clear()
            self._slots.clear()

