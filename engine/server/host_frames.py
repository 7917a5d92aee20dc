"""What the ``frame`` job kind's runner (``jobs.run_frame``) does: a compositing host's final frame (issue 37, the
OpenFX plugin in ``ofx/``).

A host's render is the deliverable, so it gets what a Blender render gets, from the same code: the consent check
and the render's audit start line (``provenance.Provenance``, which refuses before any pixel is made), the
watermark (the preview's ``mark_preview``, the mark a render writes), the closing audit line, and the provenance
attributes an EXR would carry, returned as a result field (the host has no file to put them in). The pixels go
back into the client's slot like a preview's. It runs on the render lane: host threads queue behind each other.

Which shot the frame belongs to (item 5): a request naming a ``clip`` the engine holds (``host_clips``) renders
from that clip's sequence, so the shot analysis is the clip's, made once; without one, the frame is a shot of one
frame (hosts without temporal clip access, such as MLT). Either way the plate's name carries the clip's identity
(the clip id, or the frame's own digest), so the render id, and with it the watermark and the audit lines, name
the clip; the provenance adds it as ``facefusion:clip``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import audit, consent
from ..errors import JobCancelled
from ..job import ImageInput, SwapJob
from . import host_clips


def host_frame(engines: Any, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput], settings: Any,
               emit: Callable[[dict[str, Any]], None], cancel: threading.Event
               ) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
    """The frame's result fields and its layers (name, pixels); ``jobs.run_frame`` wraps them for the queue."""
    from ..provenance import Provenance  # the pipeline's modules: loaded with the engine, not with echo

    engine = engines.get()
    warnings: list[str] = []
    plate, frame_no, clip = _shot_of(req, plate)

    def note(ev: dict[str, Any]) -> None:  # the provenance's audit-log warnings go to the host as warnings
        if ev.get("type") == "warning":
            warnings.append(str(ev.get("message")))
        emit(ev)

    with consent.given(req.get("consent")):
        identity = SimpleNamespace(digest=consent.identity_digest(sources))
        # What Provenance reads of a render's context; its render id is the one the preview's watermark carries.
        ctx = SimpleNamespace(settings=settings, identity=identity, plate=plate, emit=note)
        prov = Provenance(ctx, engine.models_dir)  # consent.require, then the render-start audit line
        outcome, faces = "error", 0
        try:
            res = engine.preview(SwapJob(sources=sources, plate=plate, output_dir=None, settings=settings),
                                 frame_no)
            faces = int(res.faces)
            if cancel.is_set():  # the host gave up on the frame while it rendered: the log says so, not "done"
                outcome = "cancelled"
                raise JobCancelled()
            outcome = "done"
        finally:
            frame = SimpleNamespace(frame=req["frame"], faces=[None] * faces, confidence=[],
                                    super_resolved=bool(settings.super_resolution and faces))
            attributes = {**prov.attributes(frame), "facefusion:clip": json.dumps(clip, sort_keys=True)}
            problem = audit.record({
                "job": "frame", "application": req.get("host", ""), "outcome": outcome, "plate": plate.describe(),
                "frames": [req["frame"], req["frame"]], "frames_written": 1 if outcome == "done" else 0,
                "output_dir": None, "source_identity": identity.digest,
                "sources": [src.describe() for src in sources], "settings": settings.as_dict(),
                "models": prov.job_models(), **prov.audit_fields()})
            if problem:
                warnings.append(problem)
    layers = [("rgba", np.asarray(res.rgba, dtype=np.float32))]
    layers += [(f"matte.{name}", np.asarray(m, dtype=np.float32)) for name, m in (res.mattes or {}).items()]
    return {"faces": faces, "warnings": [str(w) for w in (res.warnings or []) if w] + warnings,
            "provenance": attributes}, layers


def _shot_of(req: dict[str, Any], plate: ImageInput) -> tuple[ImageInput, int, dict[str, Any]]:
    """(the plate the frame renders from, its frame number there, the clip's identity for the provenance)."""
    clip = req.get("clip")
    if clip is not None:  # the clip the plugin handed over: its sequence, analysed once
        shot = host_clips.clip_plate(clip, req["frame"], plate)
        return shot, host_clips.number(clip, req["frame"]), {**clip, "analysis": "clip"}
    assert plate.pixels is not None  # a host frame is pixels in a slot
    digest = hashlib.sha256(np.ascontiguousarray(plate.pixels).tobytes()).hexdigest()[:32]
    h, w = plate.pixels.shape[:2]
    name = f"{plate.name or 'OpenFX frame'} {digest[:16]}"  # the render id's plate name: this frame
    return dataclasses.replace(plate, name=name), req["frame"], {
        "id": digest, "first": req["frame"], "last": req["frame"], "width": w, "height": h, "analysis": "frame"}
