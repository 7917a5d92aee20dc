"""``python -m engine watermark detect FILE...``: whether each file carries the mark and its payload, from the
pixels alone (metadata may be stripped): our EXRs, PNG/JPEG/TIFF exports, movies (frames pooled).

Where the mark can be: an EXR's FaceMatte layer says so; otherwise the faces found in the picture (detector and
468-point mesh), each face's landmark hull drawn in by 8 % of its size (the render's matte is eroded too)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from engine.errors import EngineError
from engine.io.files import check_regular
from engine.watermark.read import SCALES, Evidence, FaceEvidence, best_evidence, face_tries, fits

MOVIE_EXT = (".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v")
MAX_MOVIE_FRAMES = 48


@dataclass
class Finding:
    path: str
    faces: int
    evidence: Evidence | None

    def as_dict(self) -> dict[str, Any]:
        p = self.evidence.payload() if self.evidence is not None else None
        out: dict[str, Any] = {"file": self.path, "present": p is not None, "faces": self.faces,
                               "score": round(self.evidence.score, 3) if self.evidence is not None else 0.0,
                               "z": round(self.evidence.z, 2) if self.evidence is not None else 0.0}
        if p is not None:
            out.update(p.describe())
        return out


class FaceRegions:
    """Face regions of 8-bit sRGB pictures, with the engine's embedded detector and mesh (loaded once)."""

    def __init__(self) -> None:
        from engine.pipeline import Engine

        self.engine = Engine()

    def __call__(self, rgb_u8: np.ndarray) -> list[np.ndarray]:
        out = []
        for f in self.engine.analyse_u8(np.ascontiguousarray(rgb_u8), 1):
            if f.landmarks68 is None:
                continue
            m = np.zeros(rgb_u8.shape[:2], np.uint8)
            cv2.fillConvexPoly(m, cv2.convexHull(f.landmarks68.astype(np.int32)), 1)
            k = max(3, int(f.size * 0.08)) | 1
            out.append(cv2.erode(m, np.ones((k, k), np.uint8)) > 0)
        return out


def exr_pixels(path: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """An EXR's RGBA as 8-bit sRGB of what Alpha Over would show (a face layer: over black), and its face
    regions from the FaceMatte layer when it has one."""
    from engine.io import colour
    from engine.io.exr import read_exr

    px, names, attrs = read_exr(path)
    idx = {n: i for i, n in enumerate(names)}
    rgb = px[..., [idx["R"], idx["G"], idx["B"]]]
    gamut = {v: k for k, v in colour.GAMUT_INTEROP.items()}.get(attrs.get("colorInteropID", ""), "rec709")
    u8 = colour.to_u8(colour.linear_to_model(rgb, gamut))
    regions: list[np.ndarray] = []
    if "FaceMatte.A" in idx:
        matte = px[..., idx["FaceMatte.A"]] > 0.5
        n, labels = cv2.connectedComponents(matte.astype(np.uint8))
        regions = [labels == i for i in range(1, n)]
    return u8, regions


def image_pixels(path: str) -> np.ndarray:
    img = cv2.imread(path, cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH)
    if img is None:
        raise ValueError("not an image this tool can read")
    if img.dtype != np.uint8:  # 16-bit TIFF/PNG
        img = (img.astype(np.float32) / np.iinfo(img.dtype).max * 255 + 0.5).astype(np.uint8)
    return np.ascontiguousarray(img[..., ::-1])


def movie_frames(path: str, limit: int = MAX_MOVIE_FRAMES):
    import av

    with av.open(path) as box:
        for i, frame in enumerate(box.decode(video=0)):
            if i >= limit:
                break
            yield frame.to_ndarray(format="rgb24")


def detect_file(path: str, faces: FaceRegions) -> Finding:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".exr":
        u8, regions = exr_pixels(path)
        regions = regions or faces(u8)
        return _finding(path, [best_evidence(u8, regions)])
    if ext in MOVIE_EXT:
        return pool_movie(path, [face_tries(f, faces(f)) for f in movie_frames(path)])
    u8 = image_pixels(path)
    return _finding(path, [best_evidence(u8, faces(u8))])


def _finding(path: str, per_picture: list[list[Evidence]]) -> Finding:
    """A picture: its best face (one that decodes, else the surest)."""
    found = [e for pic in per_picture for e in pic]
    if not found:
        return Finding(path, 0, None)
    alone = [e for e in found if e.payload() is not None]
    return Finding(path, len(found), max(alone or found, key=lambda e: e.z))


def pool_movie(path: str, frames: list[list[list[FaceEvidence]]]) -> Finding:
    """A movie: a face that decodes alone, else every face of every frame pooled (an encoder's noise averages out
    over frames; the mark is the same on all of them): per scale, in each layout, and in the layout each face's
    width says."""
    faces = [tries for frame in frames for tries in frame]
    if not faces:
        return Finding(path, 0, None)
    alone = [e for tries in faces for t in tries for e in t.stills() if e.payload() is not None]
    if alone:
        return Finding(path, len(faces), max(alone, key=lambda e: e.z))
    pooled = [sum((tries[i].movie() for tries in faces[1:]), faces[0][i].movie()) for i in range(len(faces[0]))]
    for s in SCALES:
        sized = [t.movie() for tries in faces for t in tries if t.scale == s and fits(t)]
        pooled += [sum(sized[1:], sized[0])] if sized else []
    return Finding(path, len(faces), max(pooled, key=lambda e: (e.payload() is not None, e.z)))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine watermark",
                                description="read Face Fusion's invisible watermark from pixels")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("detect", help="report, per file, whether the mark is present and its payload")
    d.add_argument("files", nargs="+", metavar="FILE", help="EXR, PNG, JPEG, TIFF or a movie")
    d.add_argument("--json", action="store_true", help="one JSON object per file")
    args = p.parse_args(argv)
    faces = FaceRegions()
    bad = 0
    for path in args.files:
        try:
            check_regular(path, "the file")  # a FIFO, folder or device is called what it is
            res = detect_file(path, faces).as_dict()
        except EngineError as exc:
            print(f"error: {exc}", file=sys.stderr)
            bad += 1
            continue
        except (ValueError, OSError) as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            bad += 1
            continue
        if args.json:
            print(json.dumps(res, sort_keys=True))
        elif res["present"]:
            print(f"{path}: watermark present, payload {res['payload']} (engine {res['engine']}, source identity "
                  f"{res['identity_prefix']}..., render {res['render_prefix']}...), score {res['score']}")
        else:
            print(f"{path}: no watermark found ({res['faces']} face(s) checked, score {res['score']})")
    return 2 if bad else 0
