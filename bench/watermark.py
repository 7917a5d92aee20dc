"""Watermark bench (issue 14): renders real faces with the mark on and off, exports the composites (8-bit sRGB PNG,
JPEG q85, 50 % resize, H.264 CRF 23 movie), and reports per export and face size how many faces give back the
payload, the PSNR of the mark over the matte, and false detections on unmarked crops of real photos and frames.

    .venv/bin/python bench/watermark.py [--frames 4] [--crops 200]
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
from watermark_support import unmarked_crops  # noqa: E402

from engine import shots  # noqa: E402
from engine.export.frames import frame_srgb, write_movie  # noqa: E402
from engine.io import colour  # noqa: E402
from engine.io.exr import read_exr  # noqa: E402
from engine.watermark.detect import FaceRegions, detect_file, movie_frames  # noqa: E402
from engine.watermark.embed import mark_face_layer  # noqa: E402
from engine.watermark.payload import encode, payload_for  # noqa: E402
from engine.watermark.read import MIN_Z, best_evidence  # noqa: E402

SOURCE = shared("photos", "paul_rudd.jpg")


def plate(folder: str, n: int, fit: float) -> str:
    img = cv2.imread(shared("photos", "multiface.jpg"))[..., ::-1]
    lin = colour.srgb_decode(img.astype(np.float32) / 255)
    move = shots.CameraMove(pan=(20, 5), zoom=(1.0, 1.03), roll_deg=(0, 1), exposure_stops=(0, 0))
    frames, _ = shots.render_shot(lin, (1280, 720), n, move, fit=fit)
    return shots.write_sequence(frames, folder)


def render(pattern: str, out: str, *extra: str) -> None:
    cmd = [sys.executable, "-m", "engine", "swap", "--source", SOURCE, "--target", pattern, "--output", out,
           "--quiet", "--consent", "bench: facenet-pytorch test photo, internal measurement", *extra]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)


def size_bin(region: np.ndarray, scale: float = 1.0) -> str:
    """The face's width in the plate: the detector's region is the landmark hull drawn in by 8 % of the face."""
    xs = np.nonzero(region)[1]
    w = (xs.max() - xs.min()) / 0.92 / scale
    return ">=96" if w >= 96 else "64-95" if w >= 64 else "<64"


def tally(stats: dict, key: tuple[str, str], ok: bool) -> None:
    hit, n = stats.get(key, (0, 0))
    stats[key] = (hit + int(ok), n + 1)


def psnr_of_mark(off_exr: str, plate_rgba: np.ndarray, bits: list[int]) -> tuple[float, bool]:
    """PSNR (8-bit sRGB, matte > 0) of the mark as the render adds it to this unmarked face layer, and whether the
    pixels outside the matte stay bit-exact. (Two renders are not compared: re-renders may differ elsewhere.)"""
    px, names, _ = read_exr(off_exr)
    face = px[..., [names.index(c) for c in "RGBA"]]
    marked = face.copy()
    mark_face_layer(marked, plate_rgba, "rec709", bits)

    def u8(layer: np.ndarray) -> np.ndarray:
        return colour.to_u8(colour.srgb_encode(layer[..., :3] + plate_rgba[..., :3] * (1 - layer[..., 3:4])))
    inside = face[..., 3] > 0
    a, b = u8(marked), u8(face)
    mse = np.mean((a[inside].astype(np.float64) - b[inside]) ** 2)
    return 10 * np.log10(255 ** 2 / max(mse, 1e-12)), bool(np.array_equal(a[~inside], b[~inside]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--crops", type=int, default=200)
    args = ap.parse_args()
    faces = FaceRegions()
    stats: dict = {}
    psnrs, exact = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for fit in (1.15, 0.8):
            d = os.path.join(tmp, f"fit{fit}")
            pattern = plate(os.path.join(d, "plate"), args.frames, fit)
            render(pattern, os.path.join(d, "on"), "--composite")
            render(pattern, os.path.join(d, "off"), "--no-watermark")
            comps = []
            for i in range(args.frames):
                on = os.path.join(d, "on", f"facefusion.{i + 1:04d}.exr")
                attrs = read_exr(on)[2]
                want = payload_for(attrs["facefusion:source_identity"], attrs["facefusion:render_id"])
                plate_px = read_exr(os.path.join(d, "plate", f"plate.{i + 1:04d}.exr"))[0][..., :4]
                p, ok = psnr_of_mark(os.path.join(d, "off", f"facefusion.{i + 1:04d}.exr"), plate_px, encode(want))
                psnrs.append(p)
                exact &= ok
                u_on = frame_srgb(on)
                comps.append(u_on)
                half = cv2.resize(u_on, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
                jpg = cv2.imencode(".jpg", u_on[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 85])[1]
                jpeg = np.ascontiguousarray(cv2.imdecode(jpg, cv2.IMREAD_COLOR)[..., ::-1])
                for name, img, scale in (("PNG", u_on, 1.0), ("JPEG q85", jpeg, 1.0), ("50 % resize", half, 0.5)):
                    regs = faces(img)  # the faces as the detector finds them (never the render's own geometry)
                    for reg, ev in zip(regs, best_evidence(img, regs), strict=True):
                        tally(stats, (name, size_bin(reg, scale)), ev.payload() == want)
            for crf, tune in ((18, "none"), (23, "none"), (23, "grain")):  # x264's default, and engine export's
                mp4 = write_movie(comps, os.path.join(d, f"comp{crf}{tune}.mp4"), crf=crf, tune=tune)
                name = f"H.264 CRF {crf}" + (f" tune {tune}" if tune != "none" else "")
                for f in movie_frames(mp4):
                    regs = faces(f)
                    for reg, ev in zip(regs, best_evidence(f, regs), strict=True):
                        tally(stats, (f"{name}, one face", size_bin(reg)), ev.payload() == want)
                found = detect_file(mp4, faces).as_dict()  # what 'watermark detect' says of the movie (pooled)
                tally(stats, (f"{name}, movie pooled", f"fit {fit}"),
                      found["present"] and found["payload"] == want.describe()["payload"])
    print(f"PSNR of the mark over matte > 0 (8-bit sRGB), {len(psnrs)} frames: min {min(psnrs):.2f} dB, "
          f"mean {np.mean(psnrs):.2f} dB; pixels outside the matte bit-exact: {exact}")
    for (name, size), (hit, n) in sorted(stats.items()):
        print(f"{name:28s} {size:10s} {hit}/{n} decoded")
    false_pos(faces, args.crops)


def false_pos(faces: FaceRegions, n_crops: int) -> None:
    crops = unmarked_crops(per_photo=max(1, (n_crops - 80) // 5))
    scores, false = [], 0
    for c in crops:
        for ev in best_evidence(c, faces(c)):
            scores.append(ev.z)
            false += ev.payload() is not None
    print(f"false positives: {false} of {len(scores)} faces in {len(crops)} unmarked crops of real photos and walkers "
          f"frames; their mean |z| per bit: median {np.median(scores):.2f}, max {max(scores):.2f} (a mark needs "
          f">= {MIN_Z} and a valid CRC)")


if __name__ == "__main__":
    main()
