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

Jobs (each returns a ``JobHandle`` at once; nothing blocks until you wait)::

    job = eng.render(plate="/shots/sh010/plate.####.exr",           # str/path, ImageRef, or float32 pixels
                     sources=["/photos/actor.jpg"],
                     output_dir="/shots/cache/3fa2c1d0e5b6a7c8",
                     settings={"face_selector": "largest"},           # engine.settings schema; validated
                     frame_start=1001, frame_end=1100)
    for ev in job.events(timeout=60):   # blocking iterator; ends after the terminal event
        ...                             # ev["type"]: see Events below
    summary = job.wait()                # the "done" event (render); raises JobFailed / JobCancelledError

    prev = eng.preview(plate=pixels, sources=[...], settings=..., frame=1).wait()
    prev.rgba                           # PreviewFrame: float32 (H, W, 4) linear, what the EXR's RGBA would hold
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

Events (dicts, ``ev["type"]``): the types and their fields are listed once, in ``protocol.EVENT_TYPES``;
exactly one terminal event (``protocol.TERMINAL_EVENTS``) ends each job. After it, ``job.done`` is True
and ``job.state`` is its type.

Exceptions: ``EngineClientError`` (base) · ``EngineStartError`` (engine did not come up; message has
its output) · ``EngineDied`` (the engine process or connection is gone) · ``EngineHung`` (its process lives but has
sent nothing, not even a heartbeat, for ``hung_after`` seconds; restart it) · ``ProtocolMismatch``
(add-on and engine versions differ) · ``RequestError`` (the engine refused a request; the message names
the problem) · ``JobFailed`` (the job ended with an error) · ``JobCancelledError``.

Threads: one daemon reader thread per client (never keeps the host alive); ``EngineClient`` methods are
thread-safe. Zero-copy results (``copy=False``) are views of a shared-memory slot that the next request
may reuse: copy what you keep.

Modules: ``process`` (start, connect, stop, liveness), ``requests`` (the connection, requests and replies),
``jobs`` (slots, submissions, each kind's result through ``protocol.JOB_KINDS``), ``responsible`` (``consent`` and
``sign``: issue 14's requests), ``handle`` (``JobHandle``),
``api`` (``EngineClient``, made of those parts), ``errors``.
"""

from __future__ import annotations

from ..protocol import PreviewFrame
from .api import EngineClient
from .errors import (
    EngineClientError,
    EngineDied,
    EngineHung,
    EngineStartError,
    JobCancelledError,
    JobFailed,
    ProtocolMismatch,
    RequestError,
)
from .handle import JobHandle
from .jobs import ImageRef

__all__ = [
    "EngineClient", "JobHandle", "ImageRef", "PreviewFrame", "EngineClientError", "EngineStartError", "EngineDied",
    "EngineHung", "ProtocolMismatch", "RequestError", "JobFailed", "JobCancelledError",
]
