"""Tracks: faces linked across frames, gaps filled, geometry smoothed with a zero-lag centred filter (the 68
points, the box and the 468 mesh points where every frame of the window has them).

Linking by box overlap keeps identities from switching between frames; smoothing the landmarks (and so the
crop transform and the mesh) removes detector jitter without the lag of a causal filter, since offline
renders can look ahead.
"""

from __future__ import annotations

import numpy as np

from engine.stages.contracts import Face, kps5_from_68

Track = dict[int, Face]  # frame -> face


def iou(a: np.ndarray, b: np.ndarray) -> float:
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def link(frames: dict[int, list[Face]], min_iou: float = 0.25, max_gap: int = 3) -> list[Track]:
    """Greedy best-overlap linking, frame by frame; a track may skip up to ``max_gap`` frames."""
    tracks: list[Track] = []
    last: list[tuple[int, Face]] = []  # per track: (frame, face) last seen
    for f in sorted(frames):
        faces = frames[f]
        pairs = sorted(((iou(lf.box, face.box), ti, fi) for ti, (lfr, lf) in enumerate(last)
                        if f - lfr <= max_gap + 1 for fi, face in enumerate(faces)), reverse=True)
        used_t: set[int] = set()
        used_f: set[int] = set()
        for score, ti, fi in pairs:
            if score < min_iou or ti in used_t or fi in used_f:
                continue
            used_t.add(ti)
            used_f.add(fi)
            tracks[ti][f] = faces[fi]
            last[ti] = (f, faces[fi])
        for fi, face in enumerate(faces):
            if fi not in used_f:
                tracks.append({f: face})
                last.append((f, face))
    for tid, tr in enumerate(tracks):
        for face in tr.values():
            face.track_id = tid
    return tracks


def fill_gaps(track: Track) -> Track:
    """Interpolate box and landmarks over frames the detector missed inside a track."""
    out = dict(track)
    keys = sorted(track)
    for a, b in zip(keys, keys[1:], strict=False):
        for f in range(a + 1, b):
            t = (f - a) / (b - a)
            fa, fb = track[a], track[b]
            lm = None
            if fa.landmarks68 is not None and fb.landmarks68 is not None:
                lm = fa.landmarks68 * (1 - t) + fb.landmarks68 * t
            out[f] = Face(box=fa.box * (1 - t) + fb.box * t, score=min(fa.score, fb.score), landmarks68=lm,
                          kps5=kps5_from_68(lm) if lm is not None else None, track_id=fa.track_id,
                          confidence=min(fa.confidence, fb.confidence))
    return out


def smooth(track: Track, radius: int) -> Track:
    """Centred Gaussian smoothing of landmarks and boxes over +-radius frames; the window is shrunk near the
    ends of the track so it stays symmetric (zero lag for steady motion)."""
    if radius <= 0 or len(track) < 3:
        return track
    keys = sorted(track)
    sigma = max(radius / 2.0, 0.5)
    out: Track = {}
    for i, f in enumerate(keys):
        r = min(radius, i, len(keys) - 1 - i)
        window = keys[i - r:i + r + 1]
        w = np.array([np.exp(-0.5 * ((k - f) / sigma) ** 2) for k in window])
        w /= w.sum()
        src = track[f]
        lm = None
        if src.landmarks68 is not None and all(track[k].landmarks68 is not None for k in window):
            lm = sum(wk * track[k].landmarks68 for wk, k in zip(w, window, strict=True))
        box = sum(wk * track[k].box for wk, k in zip(w, window, strict=True))
        mesh = src.mesh468
        if mesh is not None and all(track[k].mesh468 is not None for k in window):
            mesh = sum(wk * track[k].mesh468 for wk, k in zip(w, window, strict=True))
        out[f] = Face(box=box, score=src.score, landmarks68=lm if lm is not None else src.landmarks68,
                      kps5=kps5_from_68(lm) if lm is not None else src.kps5, embeddings=src.embeddings,
                      track_id=src.track_id, mesh468=mesh, confidence=src.confidence)
    return out
