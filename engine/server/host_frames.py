"""What the ``frame`` job kind's runner (``jobs.run_frame``) does: a compositing host's final frame (issue 37, the
OpenFX plugin in ``ofx/``).

A host's render is the deliverable, so it gets what a Blender render gets, from the same code: the consent check
and the render's audit start line (``provenance.Provenance``, which refuses before any pixel is made), the
watermark (the preview's ``mark_preview``, the mark a render writes), the closing audit line, and the provenance
attributes an EXR would carry, returned as a result field (the host has no file to put them in). The pixels go
back into the client's slot like a preview's. It runs on the render lane: host threads queue behind each other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import audit, consent
from ..errors import JobCancelled
from ..job import ImageInput, SwapJob


def host_frame(engines: Any, req: dict[str, Any], plate: ImageInput, sources: list[ImageInput], settings: Any,
               emit: Callable[[dict[str, Any]], None], cancel: threading.Event
               ) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
    """The frame's result fields and its layers (name, pixels); ``jobs.run_frame`` wraps them for the queue."""
    from ..provenance import Provenance  # the pipeline's modules: loaded with the engine, not with echo

    engine = engines.get()
    warnings: list[str] = []

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
                                 req["frame"])
            faces = int(res.faces)
            if cancel.is_set():  # the host gave up on the frame while it rendered: the log says so, not "done"
                outcome = "cancelled"
                raise JobCancelled()
            outcome = "done"
        finally:
            frame = SimpleNamespace(frame=req["frame"], faces=[None] * faces, confidence=[],
                                    super_resolved=bool(settings.super_resolution and faces))
            attributes = prov.attributes(frame)
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
