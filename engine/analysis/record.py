"""The shot analysis of one plate as data: cuts, tracks (per frame box, 68 points, the mesh's 468 where it ran,
confidence and how each frame was obtained), one identity embedding per track and the per-track statistics.

It round-trips through bytes exactly (float64 arrays in an ``.npz``, the rest as JSON inside it), and every job
uses the round-tripped form, so a job that computed the analysis and one that read it see the same numbers.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.stages.contracts import Face, kps5_from_68

FORMAT = 1  # bumped when the stored layout changes (older files are recomputed)


@dataclass
class TrackRecord:
    track_id: int
    first: int  # frames first .. first + n - 1, consecutive (a track never crosses a cut)
    boxes: np.ndarray  # (n, 4)
    landmarks68: np.ndarray  # (n, 68, 2)
    mesh468: np.ndarray | None  # (n, 468, 3), NaN on frames the mesh did not measure; None without the mesh
    confidence: np.ndarray  # (n,) in [0, 1]
    source: list[str]  # per frame: detected | tracked | bridged | interpolated
    embedding: np.ndarray | None = None  # identity (recognizer of the analysis), mean over sampled frames
    stats: dict[str, Any] = field(default_factory=dict)  # statistic name -> JSON value (engine.analysis.stats)

    @property
    def frames(self) -> range:
        return range(self.first, self.first + len(self.boxes))

    def __contains__(self, frame: int) -> bool:
        return self.first <= frame < self.first + len(self.boxes)

    def face(self, frame: int) -> Face:
        i = frame - self.first
        lm = self.landmarks68[i].copy()
        mesh = None
        if self.mesh468 is not None and not np.isnan(self.mesh468[i, 0, 0]):
            mesh = self.mesh468[i].copy()
        return Face(box=self.boxes[i].copy(), score=float(self.confidence[i]), kps5=kps5_from_68(lm),
                    landmarks68=lm, track_id=self.track_id, mesh468=mesh, confidence=float(self.confidence[i]))


@dataclass
class ShotAnalysis:
    frames: list[int]  # the whole plate range analysed
    shot_starts: list[int]  # frames that start a shot (the first frame included)
    tracks: list[TrackRecord]
    recognizer: str  # the id the track embeddings are filed under
    info: dict[str, Any] = field(default_factory=dict)  # key material, models, timings (for the record only)

    def faces(self, frame: int) -> list[Face]:
        """Every tracked face on ``frame``, left to right (raw geometry; selection smooths)."""
        faces = [t.face(frame) for t in self.tracks if frame in t]
        return sorted(faces, key=lambda f: f.centre[0])

    def shot_of(self, frame: int) -> int:
        """The first frame of the shot ``frame`` belongs to."""
        return max(s for s in self.shot_starts if s <= frame)

    # ---- storage -----------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        arrays: dict[str, np.ndarray] = {}
        meta_tracks = []
        for k, t in enumerate(self.tracks):
            arrays[f"t{k}_boxes"] = np.asarray(t.boxes, np.float64)
            arrays[f"t{k}_lm68"] = np.asarray(t.landmarks68, np.float64)
            arrays[f"t{k}_conf"] = np.asarray(t.confidence, np.float64)
            if t.mesh468 is not None:
                arrays[f"t{k}_mesh"] = np.asarray(t.mesh468, np.float64)
            if t.embedding is not None:
                arrays[f"t{k}_emb"] = np.asarray(t.embedding, np.float64)
            meta_tracks.append({"id": t.track_id, "first": t.first, "source": t.source, "stats": t.stats})
        meta = {"format": FORMAT, "frames": self.frames, "shot_starts": self.shot_starts, "tracks": meta_tracks,
                "recognizer": self.recognizer, "info": self.info}
        arrays["meta"] = np.array(json.dumps(meta))
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    @staticmethod
    def from_bytes(data: bytes) -> ShotAnalysis:
        """Raises ValueError (or KeyError) for a damaged or older file: the caller analyses again."""
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("format") != FORMAT:
                raise ValueError(f"analysis format {meta.get('format')} is not {FORMAT}")
            tracks = []
            for k, m in enumerate(meta["tracks"]):
                tracks.append(TrackRecord(
                    m["id"], m["first"], z[f"t{k}_boxes"], z[f"t{k}_lm68"],
                    z[f"t{k}_mesh"] if f"t{k}_mesh" in z.files else None, z[f"t{k}_conf"], list(m["source"]),
                    z[f"t{k}_emb"] if f"t{k}_emb" in z.files else None, m["stats"]))
        return ShotAnalysis(meta["frames"], meta["shot_starts"], tracks, meta["recognizer"], meta["info"])

    def round_trip(self) -> ShotAnalysis:
        return ShotAnalysis.from_bytes(self.to_bytes())
