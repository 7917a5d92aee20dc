"""Provenance: which models touched a frame, each with its hash, and the EXR attributes that record it.

Every model is named by its catalogue id (or its built-in id); the hash of a file model is the sha256 the
models folder verified (else the catalogue's pin); a built-in model gives its package version instead."""

from __future__ import annotations

import importlib
import json
from typing import Any

from engine import __version__
from engine import settings as schema
from engine.analysis import face_models
from engine.models import catalogue, verify
from engine.records import JobContext, PendingFrame
from engine.stages import registry
from engine.stages.upscale_waifu2x import denoise_model


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


class Provenance:
    def __init__(self, ctx: JobContext, models_dir: str | None) -> None:
        self.ctx = ctx
        self.base = job_models(ctx.settings)
        self.analysis = analysis_models(ctx.settings)
        self.sr_model = denoise_model(ctx.settings.sr_denoise) if ctx.settings.super_resolution else None
        self.super_resolved = False  # any frame of the job
        self._record = verify.read_record(catalogue.models_dir(models_dir))
        self._hashes: dict[str, str] = {}

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
        }
