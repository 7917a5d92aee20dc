"""The add-on's one engine connection, started on demand, restarted after the engine dies.

Everything that knows ``engine.client``'s API is in this module; the rest of the add-on calls
``get().submit_render(...)``, ``get().events(job, timeout)``, ``get().cancel(job)``, ``image_ref(spec)``.
The engine is a child of Blender that exits with it: it is never what keeps Blender from quitting.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import time
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
        job = self._call(self.client.preview, plate=_ref(plate), sources=[_ref(s) for s in sources],
                         frame=frame, settings=settings, consent=consent)
        return self._call(job.wait, timeout)

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


def _start(roots: set[str]) -> Session:
    p = prefs.get_prefs()
    choice = prefs.engine_python_choice(p)
    python = choice.path
    if not python:
        raise EngineUnavailable(choice.problem())
    root = prefs.find_engine_root(p, python)
    if not root:
        raise EngineUnavailable("engine sources not found: set Engine Sources in the Face Fusion preferences "
                                "(the folder holding engine/)")
    if not p.auto_start and not bpy.app.background:
        raise EngineUnavailable("the engine is not running and Start Automatically is off")
    roots = roots | default_roots()
    roots = {r for r in roots if not any(o != r and _covered(r, {o}) for o in roots)}  # drop nested ones
    env = {}  # the client passes this process's environment on, minus Blender's Python settings
    config = ocio.config_path()
    if config:
        env["OCIO"] = config  # the engine converts colour with Blender's own config
    mod = client_module()
    try:
        client = mod.EngineClient.start(
            python, root=root, models_dir=bpy.path.abspath(p.models_dir) if p.models_dir else None,
            device=p.device,  # "auto": the engine picks TensorRT, CUDA, then CPU and reports what each model runs on
            allowed_output_roots=sorted(roots), env=env, client_name=f"blender {bpy.app.version_string}")
    except mod.EngineClientError as exc:
        raise EngineUnavailable(f"the engine did not start with {python}: {exc}") from exc
    return Session(client, roots)


def _busy(sess: Session) -> bool:
    """Whether the engine has queued or running jobs (a restart would kill them)."""
    try:
        return bool(sess.info().get("jobs"))
    except (EngineLost, EngineJobError):
        return False


def get(output_root: str | None = None) -> Session:
    """The running session; started when needed. Restarted to allow a new output root only while it is idle:
    a running bake is never killed for another one."""
    global _SESSION
    root = os.path.realpath(output_root) if output_root else None
    if _SESSION is not None and _SESSION.stale and not _busy(_SESSION):
        forget()
    if _SESSION is not None and root is not None and not _covered(root, _SESSION.roots):
        roots = _SESSION.roots | {root}
        if _busy(_SESSION):
            raise EngineUnavailable(f"the running engine may not write to {root} and is busy with a bake; wait "
                                    "for the running bake to finish (or cancel it with Esc), then bake again")
        forget()
        _SESSION = _start(roots)
    if _SESSION is None:
        _SESSION = _start({root} if root else set())
    return _SESSION


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


def forget() -> None:
    """Drop the session (after the engine died, or to restart it)."""
    global _SESSION
    if _SESSION is not None:
        _SESSION.close()
    _SESSION = None


def _prefs_changed() -> None:
    """Engine Python, sources, device or models folder changed: an idle engine stops now (the next use starts one
    with the new preferences); a busy one finishes its bake first."""
    if _SESSION is None:
        return
    if _busy(_SESSION):
        _SESSION.stale = True
    else:
        forget()


prefs.ON_ENGINE_CHANGE.append(_prefs_changed)
atexit.register(forget)
