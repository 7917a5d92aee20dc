"""Select step: which tracks are replaced (every face, the largest, one position, or the reference person).

A pure function of the shot analysis and the settings, decided over the whole plate, never over a job's frames:
a shot rendered whole, in chunks or one frame at a time replaces the same faces with the same geometry.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.analysis import ShotAnalysis
from engine.errors import EngineError
from engine.stages import track
from engine.stages.contracts import Face
from engine.stages.dlib_face import identity_distance


def select_faces(analysis: ShotAnalysis, s: Any, frames: list[int]) -> dict[int, list[Face]]:
    """The faces to replace on each of ``frames``, left to right, geometry smoothed over their whole track
    (``temporal_smoothing`` frames each side; a track never crosses a cut, so neither does its smoothing)."""
    chosen = chosen_tracks(analysis, s)
    wanted = set(frames)
    selected: dict[int, list[Face]] = {f: [] for f in frames}
    for t in analysis.tracks:
        if t.track_id not in chosen or not wanted.intersection(t.frames):
            continue
        smoothed = track.smooth({f: t.face(f) for f in t.frames}, s.temporal_smoothing)
        for f in wanted.intersection(t.frames):
            selected[f].append(smoothed[f])
    for f in frames:
        selected[f].sort(key=lambda face: face.centre[0])
    return selected


def chosen_tracks(analysis: ShotAnalysis, s: Any) -> set[int]:
    mode = s.face_selector
    if mode == "all":
        return {t.track_id for t in analysis.tracks}
    if mode in ("largest", "index"):
        # Decide per track, by majority over the frames it is on: a lost face in one frame must not hand the
        # choice to another face (identity switch).
        picked: dict[int, int] = {}
        seen: dict[int, int] = {}
        for f in analysis.frames:
            faces = analysis.faces(f)
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
        return {tid for tid, n in picked.items() if n * 2 > seen[tid]}
    ref_track = _reference_track(analysis, s)
    if ref_track.embedding is None:
        return {ref_track.track_id}
    return {t.track_id for t in analysis.tracks if t.track_id == ref_track.track_id or (
        t.embedding is not None and identity_distance(t.embedding, ref_track.embedding) < s.reference_distance)}


def _reference_track(analysis: ShotAnalysis, s: Any) -> Any:
    f = s.reference_frame
    if f not in analysis.frames:
        raise EngineError(f"reference frame {f} is outside the plate ({analysis.frames[0]}-{analysis.frames[-1]})",
                          "set --reference-frame to a frame of the plate")
    faces = analysis.faces(f)
    idx = s.reference_face
    if idx >= len(faces):
        raise EngineError(f"reference frame {f} has {len(faces)} face(s), so face index {idx} does not exist",
                          "pick a face index shown by the face picker (counted left to right from 0)")
    tid = faces[idx].track_id
    return next(t for t in analysis.tracks if t.track_id == tid)


def frame_faces(analysis: ShotAnalysis, frames: list[int]) -> dict[int, list[Face]]:
    """Every tracked face on each of ``frames``, selected or not, with its outline and size only (no mesh: a long
    job holds these for every frame)."""
    return {f: [dataclasses.replace(t.face(f), mesh468=None) for t in analysis.tracks if f in t] for f in frames}
