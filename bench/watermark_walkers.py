"""Watermark bench on real footage (issue 14): the first frames of ../shared/data/walkers_1080p.mp4 rendered through
the engine (face layer, mark off), the mark added to each face layer exactly as a render adds it (the render's own
payload), the composites exported as PNG / JPEG q85 / 50 % resize (every 4th frame, each face read alone) and as
H.264 movies (libx264, yuv420p, preset medium; CRF 23 and 18, x264's default tuning and tune=grain) read by the
detector pooling the first 24 and all 48 frames. Faces are found by the detector on the exported pixels. The same
composites unmarked, encoded at CRF 23, say whether a movie gives a false detection.

    .venv/bin/python bench/watermark_walkers.py [--frames 48] [--render DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from shared_data import path as shared  # noqa: E402

from engine.export.frames import write_movie  # noqa: E402
from engine.io import colour  # noqa: E402
from engine.io.exr import read_exr  # noqa: E402
from engine.io.plates import Plate  # noqa: E402
from engine.job import ImageInput  # noqa: E402
from engine.watermark.detect import FaceRegions, Finding, movie_frames, pool_movie  # noqa: E402
from engine.watermark.embed import mark_face_layer  # noqa: E402
from engine.watermark.payload import Payload, encode, payload_for  # noqa: E402
from engine.watermark.read import best_evidence, face_tries  # noqa: E402

WALKERS = shared("walkers_1080p.mp4")
SOURCE = shared("photos", "paul_rudd.jpg")


def render(out: str, n: int) -> None:
    cmd = [sys.executable, "-m", "engine", "swap", "--source", SOURCE, "--target", WALKERS, "--frames", f"1-{n}",
           "--output", out, "--no-watermark", "--quiet", "--skip-existing",
           "--consent", "bench: facenet-pytorch test photo, internal measurement"]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)


def over_u8(layer: np.ndarray, plate: np.ndarray, gamut: str) -> np.ndarray:
    return colour.to_u8(colour.linear_to_model(layer[..., :3] + plate[..., :3] * (1 - layer[..., 3:4]), gamut))


def composites(folder: str, n: int) -> tuple[list[np.ndarray], list[np.ndarray], list[float], Payload]:
    """(marked 8-bit composites, unmarked ones, PSNR per frame over matte > 0, the payload)."""
    plate = Plate(ImageInput(path=WALKERS))
    on, off, psnr = [], [], []
    want = None
    for i in range(1, n + 1):
        px, names, attrs = read_exr(os.path.join(folder, f"facefusion.{i:04d}.exr"))
        face = px[..., [names.index(c) for c in "RGBA"]].copy()
        lin, gamut = plate.read(i)
        want = payload_for(attrs["facefusion:source_identity"], attrs["facefusion:render_id"])
        off.append(over_u8(face, lin, gamut))
        mark_face_layer(face, lin, gamut, encode(want))
        on.append(over_u8(face, lin, gamut))
        inside = face[..., 3] > 0
        mse = np.mean((on[-1][inside].astype(np.float64) - off[-1][inside]) ** 2)
        psnr.append(10 * np.log10(255 ** 2 / max(mse, 1e-12)))
    plate.close()
    assert want is not None
    return on, off, psnr, want


def size_bin(region: np.ndarray, scale: float = 1.0) -> str:
    xs = np.nonzero(region)[1]
    w = (xs.max() - xs.min()) / 0.92 / scale
    return ">=96" if w >= 96 else "64-95" if w >= 64 else "<64"


def stills(frames: list[np.ndarray], faces: FaceRegions, want: Payload, stats: dict) -> None:
    for u in frames[::4]:
        half = cv2.resize(u, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
        jpg = cv2.imencode(".jpg", u[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 85])[1]
        jpeg = np.ascontiguousarray(cv2.imdecode(jpg, cv2.IMREAD_COLOR)[..., ::-1])
        for name, img, scale in (("PNG", u, 1.0), ("JPEG q85", jpeg, 1.0), ("50 % resize", half, 0.5)):
            regs = faces(img)
            for reg, ev in zip(regs, best_evidence(img, regs), strict=True):
                key = (name, size_bin(reg, scale))
                hit, k = stats.get(key, (0, 0))
                stats[key] = (hit + int(ev.payload() == want), k + 1)


def movie(frames: list[np.ndarray], path: str, crf: int, tune: str, faces: FaceRegions, want: Payload | None
          ) -> list[str]:
    """What the detector says of the movie pooled over its first 24 and all its frames."""
    write_movie(frames, path, crf=crf, tune=tune)
    tries = [face_tries(f, faces(f)) for f in movie_frames(path, limit=len(frames))]
    out = []
    for n in (24, len(frames)):
        f: Finding = pool_movie(path, tries[:n])
        p = f.evidence.payload() if f.evidence is not None else None
        ok = (p == want) if want is not None else (p is None)
        out.append(f"{n} frames: {'found' if p is not None else 'not found'}"
                   f"{' (right payload)' if p is not None and p == want else ''}"
                   f", z {f.evidence.z if f.evidence is not None else 0:.2f} [{'ok' if ok else 'FAIL'}]")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--render", help="reuse this folder of face-layer EXRs (mark off) of walkers frames 1-N")
    ap.add_argument("--stills-only", action="store_true", help="no movies")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.render or os.path.join(tmp, "render")
        if not all(os.path.exists(os.path.join(folder, f"facefusion.{i:04d}.exr")) for i in range(1, args.frames + 1)):
            render(folder, args.frames)
        on, off, psnr, want = composites(folder, args.frames)
        print(f"PSNR of the mark over matte > 0 (8-bit sRGB), {len(psnr)} walkers frames: min {min(psnr):.2f} dB, "
              f"mean {np.mean(psnr):.2f} dB", flush=True)
        faces = FaceRegions()
        stats: dict = {}
        stills(on, faces, want, stats)
        for (name, size), (hit, k) in sorted(stats.items()):
            print(f"{name:12s} {size:6s} {hit}/{k} faces decoded alone", flush=True)
        for crf, tune in () if args.stills_only else ((23, "none"), (23, "grain"), (18, "none")):
            res = movie(on, os.path.join(tmp, f"on{crf}{tune}.mp4"), crf, tune, faces, want)
            print(f"H.264 CRF {crf} tune {tune}: " + "; ".join(res), flush=True)
        if not args.stills_only:
            res = movie(off, os.path.join(tmp, "off.mp4"), 23, "none", faces, None)
            print("unmarked, H.264 CRF 23 tune none: " + "; ".join(res), flush=True)


if __name__ == "__main__":
    main()
