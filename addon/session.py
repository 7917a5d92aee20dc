"""The add-on's one engine connection, started on demand, restarted after the engine dies.

Everything that knows ``engine.client``'s API is in this module; the rest of the add-on calls
``get().submit_render(...)``, ``get().events(job, timeout)``, ``get().cancel(job)``, ``image_ref(spec)``.
The engine is a child of Blender that exits with it: it is never what keeps Blender from quitting.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

import bpy

from . import images, ocio, prefs
from .engine_link import client_module
from .engine_link import engine_version as bundled_version


class EngineUnavailable(RuntimeError):
    """No engine could be started or reached; the message says what to set up."""


class EngineLost(RuntimeError):
    """The engine is gone for this session: its process or connection died (the client's ``EngineDied``), or it
    stopped answering (the client's ``EngineHung``). The session is dropped; the next ``get()`` starts a fresh
    engine. Not the client's ``EngineDied``, which a hung engine does not raise."""


_SESSION: Session | None = None
_STARTING: _Starting | None = None  # an engine being started in the background (on_demand: never waits for it)
_LOCK = threading.Lock()  # between a background start handing over its session and ``forget`` dropping it


def _client_errors() -> tuple[type[BaseException], ...]:
    mod = client_module()
    # A stuck engine (alive, silent past the heartbeat limit) is handled like a dead one: dropped and restarted.
    return (mod.EngineDied, mod.EngineHung, EOFError, BrokenPipeError, ConnectionError)


def _ref(spec: dict[str, Any]) -> Any:
    """A plate/source for the client: ImageRef(path=...) or ImageRef(pixels=...) for images in the .blend."""
    mod = client_module()
    if "path" in spec:
        return mod.ImageRef(path=spec["path"], colorspace=spec.get("colorspace", "auto"))
    image = spec["image"]
    return mod.ImageRef(pixels=images.image_pixels(image), colorspace=spec.get("colorspace", "auto"), name=image.name)


class Session:
    def __init__(self, client: Any, roots: set[str]) -> None:
        self.client = client
        self.roots = roots
        self.stale = False  # a preference it was started with changed while it was busy: restarted once idle

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        mod = client_module()
        try:
            return fn(*args, **kwargs)
        except _client_errors() as exc:
            if _SESSION is self:  # a dead or stuck engine is never reused: the next get() starts a fresh one
                forget()
            raise EngineLost(str(exc)) from exc
        except (mod.RequestError, mod.JobFailed) as exc:
            raise EngineJobError(str(exc)) from exc

    # -- jobs
    def submit_render(self, request: dict[str, Any]) -> Any:
        """Submit a render; returns the client's Job."""
        req = dict(request)
        return self._call(self.client.render, plate=_ref(req.pop("plate")),
                          sources=[_ref(s) for s in req.pop("sources")], **req)

    def events(self, job: Any, timeout: float) -> list[dict[str, Any]]:
        """New events of ``job``; waits up to ``timeout`` seconds for the first one (0: never blocks). A job whose
        engine went away ends with a ``lost`` event (the session is dropped: the next ``get()`` starts a fresh one)."""
        deadline = time.monotonic() + timeout
        while True:
            evs = self._call(job.poll)
            lost = getattr(job, "lost", None)
            if lost:  # the client ended the job itself (its engine died or was stopped): say so, drop the session
                if _SESSION is self:
                    forget()
                return [e for e in evs if e.get("type") != "error"] + [{"type": "lost", "message": lost}]
            if evs or job.done or time.monotonic() >= deadline:
                return evs
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def cancel(self, job: Any) -> None:
        self._call(job.cancel)

    def preview(self, plate: dict[str, Any], sources: list[dict[str, Any]], frame: int,
                settings: dict[str, Any], timeout: float = 300.0, consent: list[dict[str, str]] | None = None) -> Any:
        return self._call(self.submit_preview(plate, sources, frame, settings, consent).wait, timeout)

    def submit_preview(self, plate: dict[str, Any], sources: list[dict[str, Any]], frame: int,
                       settings: dict[str, Any], consent: list[dict[str, str]] | None = None,
                       analysis_window: int = 0) -> Any:
        """A preview job, not waited for (``preview_result`` polls it)."""
        return self._call(self.client.preview, plate=_ref(plate), sources=[_ref(s) for s in sources],
                          frame=frame, settings=settings, consent=consent, analysis_window=analysis_window)

    def preview_result(self, job: Any) -> Any:
        """A submitted preview's PreviewFrame once it is over, None while it runs; never blocks."""
        self._call(job.poll)
        return self._call(job.outcome) if job.done else None

    # -- responsible use (issue 14): consent per source identity, Content Credentials on rendered files
    def consent(self, sources: list[dict[str, Any]], action: str = "check", note: str = "", who: str = "",
                records: list[dict[str, str]] | None = None, timeout: float = 120.0) -> dict[str, Any]:
        """{identity, consent (record or None), revoked}: the engine hashes the photos; ``grant`` records one."""
        job = self._call(self.client.consent, sources=[_ref(s) for s in sources], action=action, note=note, who=who,
                         consent=records)
        return self._call(job.wait, timeout)

    def sign(self, output_dir: str, files: list[dict[str, Any]], software: str, timeout: float = 600.0
             ) -> list[dict[str, Any]]:
        """Sign rendered files with C2PA manifests; per file {path, state, message}."""
        job = self._call(self.client.sign, output_dir=output_dir, files=files, software=software)
        return list(self._call(job.wait, timeout).get("files", []))

    def analyse(self, plate: dict[str, Any], frame: int, settings: dict[str, Any],
                timeout: float = 300.0) -> list[dict[str, Any]]:
        job = self._call(self.client.analyse, plate=_ref(plate), frame=frame, settings=settings)
        return self._call(job.wait, timeout)

    def source_faces(self, photos: list[dict[str, Any]], settings: dict[str, Any], timeout: float = 300.0
                     ) -> list[dict[str, Any]]:
        """Per source photo: the faces a bake with ``settings`` finds in it and which one it uses."""
        job = self._call(self.client.source_faces, sources=[_ref(p) for p in photos], settings=settings)
        return list(self._call(job.wait, timeout).get("photos", []))

    def info(self) -> dict[str, Any]:
        info = dict(self.client.info)
        info.update(self._call(self.client.status))
        return info

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # closing a dead engine must never stop Blender from quitting
            pass


class EngineJobError(RuntimeError):
    """The engine refused or failed a job; the message names the problem."""


def default_roots() -> set[str]:
    """Folders the engine may write to from the start, so a bake never needs it restarted: the .blend's folder,
    the preferences' cache folder and the temp folder (an unsaved .blend's cache lives there)."""
    roots = {os.path.realpath(tempfile.gettempdir())}
    if bpy.data.filepath:
        roots.add(os.path.realpath(os.path.dirname(bpy.data.filepath)))
    cache = prefs.get_prefs().cache_dir or prefs.DEFAULT_CACHE
    if not (cache.startswith("//") and not bpy.data.filepath):
        roots.add(os.path.realpath(bpy.path.abspath(cache)))
    return roots


def _covered(root: str, roots: set[str]) -> bool:
    for r in roots:
        try:
            if os.path.commonpath([root, r]) == r:
                return True
        except ValueError:  # another drive (Windows)
            pass
    return False


@dataclass
class _Launch:
    """What starting an engine needs, read from Blender on the main thread; ``connect`` then runs on any thread."""
    candidates: list[tuple[str, str]]  # (engine Python, its engine sources), tried in order
    roots: set[str]
    models_dir: str | None
    device: str
    env: dict[str, str]
    client_name: str

    def connect(self) -> Session:
        """Probe the engine's Python and start the engine (seconds): no bpy, so it may run off the main thread."""
        choice = prefs.choose_python(self.candidates)
        if not choice.path:
            raise EngineUnavailable(choice.problem())
        root = dict(self.candidates)[choice.path]
        if not root:
            raise EngineUnavailable("engine sources not found: set Engine Sources in the Face Fusion preferences "
                                    "(the folder holding engine/)")
        mod = client_module()
        try:
            client = mod.EngineClient.start(
                choice.path, root=root, models_dir=self.models_dir,
                device=self.device,  # "auto": the engine picks TensorRT, CUDA, then CPU and reports what each runs on
                allowed_output_roots=sorted(self.roots), env=self.env, client_name=self.client_name)
        except mod.EngineClientError as exc:
            raise EngineUnavailable(f"the engine did not start with {choice.path}: {exc}") from exc
        return Session(client, self.roots)


def _launch(roots: set[str]) -> _Launch:
    """Read what a start needs (main thread). Refuses at once when automatic start is off."""
    p = prefs.get_prefs()
    if not p.auto_start and not bpy.app.background:
        raise EngineUnavailable("the engine is not running and Start Automatically is off")
    roots = roots | default_roots()
    roots = {r for r in roots if not any(o != r and _covered(r, {o}) for o in roots)}  # drop nested ones
    env = {}  # the client passes this process's environment on, minus Blender's Python settings
    config = ocio.config_path()
    if config:
        env["OCIO"] = config  # the engine converts colour with Blender's own config
    return _Launch(prefs.python_candidates(p), roots, bpy.path.abspath(p.models_dir) if p.models_dir else None,
                   p.device, env, f"blender {bpy.app.version_string}")


def _start(roots: set[str]) -> Session:
    return _launch(roots).connect()


def _busy(sess: Session) -> bool:
    """Whether the engine has queued or running jobs (a restart would kill them)."""
    try:
        return bool(sess.info().get("jobs"))
    except (EngineLost, EngineJobError):
        return False


def _busy_elsewhere(root: str) -> EngineUnavailable:
    return EngineUnavailable(f"the running engine may not write to {root} and is busy with a bake; wait for the "
                             "running bake to finish (or cancel it with Esc), then bake again")


def get(output_root: str | None = None) -> Session:
    """The running session; started when needed (waits for a start under way). Restarted to allow a new output root
    only while it is idle: a running bake is never killed for another one."""
    global _SESSION
    _adopt(wait=True)
    root = os.path.realpath(output_root) if output_root else None
    if _SESSION is not None and _SESSION.stale and not _busy(_SESSION):
        forget()
    if _SESSION is not None and root is not None and not _covered(root, _SESSION.roots):
        roots = _SESSION.roots | {root}
        if _busy(_SESSION):
            raise _busy_elsewhere(root)
        forget()
        _SESSION = _start(roots)
    if _SESSION is None:
        _SESSION = _start({root} if root else set())
    return _SESSION


@dataclass
class _Starting:
    """An engine start running on a thread of its own (probe, spawn, handshake: seconds), so the UI never pauses."""
    launch: _Launch
    thread: threading.Thread | None = None
    session: Session | None = None
    error: str = ""
    dropped: bool = False  # forgotten while starting (a preference changed, the add-on went away)

    def run(self) -> None:
        try:
            sess = self.launch.connect()
        except EngineUnavailable as exc:
            self.error = str(exc)
            return
        except Exception as exc:  # a thread's exception would only be printed: the next ready() reports it
            self.error = f"the engine did not start: {type(exc).__name__}: {exc}"
            return
        with _LOCK:
            if not self.dropped:
                self.session = sess
                return
        sess.close()

    def drop(self) -> None:
        with _LOCK:
            self.dropped = True
            sess, self.session = self.session, None
        if sess is not None:
            sess.close()


def _adopt(wait: bool) -> None:
    """Take over the engine a background start made (``wait``: once it is up); a failed start raises its reason."""
    global _STARTING, _SESSION
    st = _STARTING
    if st is None or st.thread is None:
        return
    if st.thread.is_alive():
        if not wait:
            return
        st.thread.join()
    _STARTING = None
    if st.error:
        raise EngineUnavailable(st.error)
    if st.session is not None:
        if _SESSION is not None:
            _SESSION.close()
        _SESSION = st.session


def starting() -> bool:
    """Whether an engine is being started in the background."""
    return _STARTING is not None and _STARTING.thread is not None and _STARTING.thread.is_alive()


def ready(output_root: str | None = None) -> bool:
    """Whether an engine that may write to ``output_root`` runs, without ever waiting for one: if none does, it is
    started (or an idle one restarted) on a thread and False is returned until it is up. Raises EngineUnavailable
    when it cannot start (the preferences' problem, or the reason the background start failed). Main thread."""
    global _STARTING
    _adopt(wait=False)
    if _STARTING is not None:
        return False
    root = os.path.realpath(output_root) if output_root else None
    roots = {root} if root else set()
    sess = _SESSION
    if sess is not None and sess.stale and not _busy(sess):
        forget()
        sess = None
    if sess is not None:
        if root is None or _covered(root, sess.roots):
            return True
        if _busy(sess):
            raise _busy_elsewhere(root)
        roots |= sess.roots
        forget()
    st = _Starting(_launch(roots))
    st.thread = threading.Thread(target=st.run, name="face-fusion-engine-start", daemon=True)
    _STARTING = st
    st.thread.start()
    return False


def engine_version() -> str:
    """Version of the engine that makes the frames: the running engine's, else the one shipped with the add-on."""
    if _SESSION is not None:
        version = (getattr(_SESSION.client, "info", None) or {}).get("engine_version")
        if version:
            return str(version)
    return bundled_version()


def engine_report() -> dict[str, Any]:
    """Engine version, execution providers and installed models, as the running engine reports them in its
    hello/status replies (nothing is spawned for it)."""
    return get().info()


def running() -> bool:
    """Whether an engine session is there (never starts one)."""
    return _SESSION is not None


def forget() -> None:
    """Drop the session (after the engine died, or to restart it), and any start under way (never waits for it)."""
    global _SESSION, _STARTING
    st, _STARTING = _STARTING, None
    if st is not None:
        st.drop()
    if _SESSION is not None:
        _SESSION.close()
    _SESSION = None


def shutdown() -> None:
    """The add-on goes away (or Blender quits): drop everything and let a start under way end first, so no thread
    of ours outlives the add-on (it ends within the probe's and the engine's start-up limits)."""
    st = _STARTING
    forget()
    if st is not None and st.thread is not None:
        st.thread.join()


def _prefs_changed() -> None:
    """Engine Python, sources, device or models folder changed: an idle engine stops now (the next use starts one
    with the new preferences); a busy one finishes its bake first."""
    if _SESSION is None:
        forget()  # a start under way used the old preferences
        return
    if _busy(_SESSION):
        _SESSION.stale = True
    else:
        forget()


prefs.ON_ENGINE_CHANGE.append(_prefs_changed)
atexit.register(shutdown)
