"""Provenance: which models touched a frame, each with its hash, and the EXR attributes that record it.

Every model is named by its catalogue id (or its built-in id); the hash of a file model is the sha256 the
models folder verified (else the catalogue's pin); a built-in model gives its package version instead."""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

from engine import __version__, audit, consent, policy
from engine import settings as schema
from engine.analysis import face_models
from engine.models import catalogue, verify
from engine.records import JobContext, PendingFrame
from engine.stages import registry
from engine.stages.composite import FrameLayers, composite_box
from engine.stages.upscale_waifu2x import denoise_model
from engine.watermark import payload as wm_payload
from engine.watermark.embed import mark_face_layer


def analysis_models(s: Any) -> list[str]:
    """The models of the shot analysis, which looks at every frame: detector, landmarker and the recognizer
    (each track's identity is part of the analysis whatever the selector)."""
    analysis = face_models(s)
    return [analysis.detector, analysis.landmarker, analysis.recognizer]


def job_models(s: Any) -> list[str]:
    """Model ids a job with settings ``s`` loads for every frame (super-resolution is per frame)."""
    ids = analysis_models(s)
    picked = [s.swapper, s.face_enhancer] + [getattr(s, layer.setting) for layer in registry.matte_layers()]
    return _with_requirements(ids + [m for m in picked if m != "none"])


def _with_requirements(ids: list[str]) -> list[str]:
    out: list[str] = []
    todo = list(ids)
    while todo:
        mid = todo.pop(0)
        if mid in out:
            continue
        out.append(mid)
        if mid not in registry.BUILTINS:
            todo.extend(catalogue.get(mid).requires)
    return out


def neural_models(s: Any) -> set[str]:
    """The job's models that run on onnxruntime (their provider is reported)."""
    return {m for m in job_models(s) if registry.is_neural(m)}


def render_id(ctx: JobContext) -> str:
    """What the pixels depend on: not how they are packed (face layer or composite) nor the mark itself, so a
    face-layer render and a composite render of one shot carry the same mark and Alpha Over still matches."""
    pixels = {k: v for k, v in schema.normalise(ctx.settings).items() if k not in ("output_mode", "watermark")}
    plate_name = os.path.basename(ctx.plate.describe().rstrip("/"))
    return wm_payload.render_id(schema.canonical_json(pixels), ctx.identity.digest, plate_name, __version__)


def mark_preview(ctx: JobContext, p: PendingFrame, layers: FrameLayers, rgba: Any) -> tuple[FrameLayers, Any]:
    """A preview carries the mark its render would write, so preview and baked frame are the same pixels. Nothing
    is recorded: a preview writes no file and no audit line."""
    if not (ctx.settings.watermark or policy.watermark_locked()):
        return layers, rgba
    return _marked(ctx, p, layers, rgba, wm_payload.payload_for(ctx.identity.digest, render_id(ctx)))


def _marked(ctx: JobContext, p: PendingFrame, layers: FrameLayers, rgba: Any, payload: wm_payload.Payload | None
            ) -> tuple[FrameLayers, Any]:
    """The frame's layers and RGBA with the invisible watermark in the face layer (and so in the composite)."""
    if payload is None or not p.faces:
        return layers, rgba
    box = mark_face_layer(layers.face, p.plate, p.gamut, wm_payload.encode(payload))
    if ctx.settings.output_mode != "composite":
        return layers, layers.face
    if box is not None:  # ``rgba`` is this frame's composite: only the marked box is composited again
        composite_box(rgba, p.plate, layers, box)
    return layers, rgba


class Provenance:
    def __init__(self, ctx: JobContext, models_dir: str | None) -> None:
        self.ctx = ctx
        self.base = job_models(ctx.settings)
        self.analysis = analysis_models(ctx.settings)
        self.sr_model = denoise_model(ctx.settings.sr_denoise) if ctx.settings.super_resolution else None
        self.super_resolved = False  # any frame of the job
        self._record = verify.read_record(catalogue.models_dir(models_dir))
        self._hashes: dict[str, str] = {}
        self._responsible_use()

    # ---- responsible use: watermark, consent, audit chain (issue 14) ---------------------------------------
    def _responsible_use(self) -> None:
        """Decide the watermark, take the consent on record and write the render's audit start line, whose hash
        every EXR of the render carries (a log rewritten or cut short no longer matches the frames)."""
        ctx = self.ctx
        s = ctx.settings
        self.render_id = render_id(ctx)
        locked = policy.watermark_locked()
        on = s.watermark or locked
        self.payload = wm_payload.payload_for(ctx.identity.digest, self.render_id) if on else None
        self.watermark_state = ("on" if s.watermark else "on: the studio policy locks it (the setting was off)") \
            if on else "off: turned off by the watermark setting"
        self.consent = consent.require(ctx.identity.digest)
        self.audit_line, problem = audit.append({
            "job": "render-start", "render_id": self.render_id, "source_identity": ctx.identity.digest,
            "plate": ctx.plate.describe(), "consent": self.consent, "watermark": self._watermark_record()})
        if problem:
            ctx.emit({"type": "warning", "frame": None, "message": problem})

    def _watermark_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.watermark_state}
        if self.payload is not None:
            out.update(self.payload.describe())
        return out

    def audit_fields(self) -> dict[str, Any]:
        """What the render's closing audit line adds: the start line it closes, consent and watermark state."""
        return {"start": self.audit_line, "render_id": self.render_id, "consent": self.consent,
                "watermark": self._watermark_record()}

    def mark(self, p: PendingFrame, layers: FrameLayers, rgba: Any) -> tuple[FrameLayers, Any]:
        """The frame's layers and RGBA with the invisible watermark in the face layer (and so in the composite)."""
        return _marked(self.ctx, p, layers, rgba, self.payload)

    def hash_of(self, model_id: str) -> str:
        if model_id not in self._hashes:
            self._hashes[model_id] = self._hash(model_id)
        return self._hashes[model_id]

    def _hash(self, model_id: str) -> str:
        if model_id in registry.BUILTINS:  # no file: the version of the module that holds it
            module = registry.BUILTINS[model_id].version
            try:
                return f"{module} {importlib.import_module(module).__version__}"
            except (ImportError, AttributeError):
                return f"engine {__version__}"
        rec = self._record.get(model_id) or {}
        entry = catalogue.get(model_id)
        sha = rec.get("sha256") or (entry.sha256[0] if entry.sha256 else "")
        if sha and not entry.sha256:  # no published hash: the one recorded at its first import (issue 35)
            return f"sha256:{sha} (trusted on first use)"
        return f"sha256:{sha}" if sha else "unverified"

    def models(self, super_resolved: bool) -> dict[str, str]:
        ids = self.base + ([self.sr_model] if super_resolved and self.sr_model else [])
        return {m: self.hash_of(m) for m in ids}

    def frame_models(self, p: PendingFrame) -> dict[str, str]:
        """What touched this frame: a frame without a face to replace saw only the analysis models."""
        self.super_resolved = self.super_resolved or p.super_resolved
        if not p.faces:
            return {m: self.hash_of(m) for m in self.analysis}
        return self.models(p.super_resolved)

    def job_models(self) -> dict[str, str]:
        return self.models(self.super_resolved)

    def attributes(self, p: PendingFrame) -> dict[str, str]:
        ctx = self.ctx
        return {
            "Software": f"Face Fusion engine {__version__}",
            "facefusion:engine_version": __version__,
            "facefusion:settings": schema.canonical_json(ctx.settings),
            "facefusion:models": json.dumps(self.frame_models(p)),
            "facefusion:source_identity": ctx.identity.digest,
            "facefusion:plate": ctx.plate.describe(),
            "facefusion:frame": str(p.frame),
            "facefusion:faces": str(len(p.faces)),
            # per replaced face, Face1..N: how sure the shot analysis is of it on this frame, in [0, 1]
            "facefusion:confidence": json.dumps([round(float(c), 4) for c in p.confidence]),
            "facefusion:notice": "Synthetic face replacement made with Face Fusion",
            "facefusion:render_id": self.render_id,
            "facefusion:watermark": json.dumps(self._watermark_record(), sort_keys=True),
            "facefusion:consent": json.dumps(self.consent, sort_keys=True),
            "facefusion:audit_line": self.audit_line or "",
            **self._nonfinite(p.frame),
        }

    def _nonfinite(self, frame: int) -> dict[str, str]:
        """The plate's NaN/inf values on this frame (engine.io.nonfinite: filled under the matte, kept outside), when
        it had any. A host frame's context (engine.server.host_frames) holds the input, not a Plate: none there."""
        ledger = getattr(self.ctx.plate, "nonfinite", None)
        n = ledger.counts.get(frame) if ledger is not None else None
        return {"facefusion:nonfinite_plate_values": str(n)} if n else {}
