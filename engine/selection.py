"""Select step: which tracks are replaced (every face, the largest, one position, or the reference person)."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.analysis import face_models
from engine.errors import EngineError
from engine.io import colour
from engine.records import JobContext
from engine.stages import track
from engine.stages.contracts import Face
from engine.stages.dlib_face import identity_distance


def select_faces(engine: Any, ctx: JobContext, raw: dict[int, list[Face]], tracks: list[track.Track],
                 frames: list[int]) -> dict[int, list[Face]]:
    """The faces to replace in each of ``frames``, left to right."""
    keep = _select_tracks(engine, ctx, tracks, raw)
    selected: dict[int, list[Face]] = {}
    for f in frames:
        faces = [t[f] for tid, t in enumerate(tracks) if f in t and tid in keep.get(f, set())]
        selected[f] = sorted(faces, key=lambda face: face.centre[0])
    return selected


def _whole_tracks(tracks: list[track.Track], chosen: set[int]) -> dict[int, set[int]]:
    per_frame: dict[int, set[int]] = {}
    for tid, t in enumerate(tracks):
        if tid in chosen:
            for f in t:
                per_frame.setdefault(f, set()).add(tid)
    return per_frame


def _select_tracks(engine: Any, ctx: JobContext, tracks: list[track.Track], raw: dict[int, list[Face]]
                   ) -> dict[int, set[int]]:
    s = ctx.settings
    mode = s.face_selector
    if mode == "all":
        return _whole_tracks(tracks, set(range(len(tracks))))
    if mode in ("largest", "index"):
        # Decide per track, by majority over the frames where it was detected: a detector drop-out in one
        # frame must not hand the choice to another face (identity switch).
        picked: dict[int, int] = {}
        seen: dict[int, int] = {}
        for faces in raw.values():
            for face in faces:
                seen[face.track_id] = seen.get(face.track_id, 0) + 1
            if not faces:
                continue
            if mode == "largest":
                pick = max(faces, key=lambda face: face.size)
            elif s.face_index < len(faces):
                pick = faces[s.face_index]  # faces are sorted left to right
            else:
                continue
            picked[pick.track_id] = picked.get(pick.track_id, 0) + 1
        return _whole_tracks(tracks, {tid for tid in range(len(tracks))
                                      if picked.get(tid, 0) * 2 > seen.get(tid, 0)})
    ref = _reference_embedding(engine, ctx, raw)
    rec = face_models(s).recognizer
    chosen = set()
    for tid, t in enumerate(tracks):
        dists = [identity_distance(face.embeddings[rec], ref) for face in t.values() if rec in face.embeddings]
        if dists and float(np.median(dists)) < s.reference_distance:
            chosen.add(tid)
    return _whole_tracks(tracks, chosen)


def _reference_embedding(engine: Any, ctx: JobContext, raw: dict[int, list[Face]]) -> np.ndarray:
    s, plate = ctx.settings, ctx.plate
    f = s.reference_frame
    if f not in plate.frames:
        raise EngineError(f"reference frame {f} is outside the plate ({plate.frames[0]}-{plate.frames[-1]})",
                          "set --reference-frame to a frame of the plate")
    if f in raw:  # analysed with this job's frames already (embeddings included in reference mode)
        faces = raw[f]
    else:
        rgba, gamut = plate.read(f)
        u8 = colour.to_u8(colour.linear_to_model(rgba[..., :3], gamut))
        faces = engine.analyse_u8(u8, s.detector_upsample, embed=True, models=face_models(s))
    idx = s.reference_face
    if idx >= len(faces):
        raise EngineError(f"reference frame {f} has {len(faces)} face(s), so face index {idx} does not exist",
                          "pick a face index shown by the face picker (counted left to right from 0)")
    return faces[idx].embeddings[face_models(s).recognizer]
