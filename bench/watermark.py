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
from engine.watermark.detect import FaceRegions, movie_frames  # noqa: E402
from engine.watermark.payload import payload_for  # noqa: E402
from engine.watermark.read import best_evidence  # noqa: E402

SOURCE = shared("photos", "paul_rudd.jpg")


def plate(folder: str, n: int, fit: float) -> str:
    img = cv2.imread(shared("photos", "multiface.jpg"))[..., ::-1]
    lin = colour.srgb_decode(img.astype(np.float32) / 255)
    move = shots.CameraMove(pan=(20, 5), zoom=(1.0, 1.03), roll_deg=(0, 1), exposure_stops=(0, 0))
    frames, _ = shots.render_shot(lin, (1280, 720), n, move, fit=fit)
    return shots.write_sequence(frames, folder)


def render(pattern: str, out: str, *extra: str) -> None:
    cmd = [sys.executable, "-m", "engine", "swap", "--source", SOURCE, "--target", pattern, "--output", out,
           "--composite", "--quiet", "--consent", "bench: facenet-pytorch test photo, internal measurement", *extra]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)


def size_bin(region: np.ndarray) -> str:
    ys, xs = np.nonzero(region)
    w = (xs.max() - xs.min()) / 0.8  # the eroded landmark hull is about 80 % of the face width
    return ">=96" if w >= 96 else "64-95" if w >= 64 else "<64"


def tally(stats: dict, key: tuple[str, str], ok: bool) -> None:
    hit, n = stats.get(key, (0, 0))
    stats[key] = (hit + int(ok), n + 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--crops", type=int, default=200)
    args = ap.parse_args()
    faces = FaceRegions()
    stats: dict = {}
    psnrs, exact = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for fit in (1.15, 0.8):
            d = os.path.join(tmp, f"fit{fit}")
            pattern = plate(os.path.join(d, "plate"), args.frames, fit)
            render(pattern, os.path.join(d, "on"))
            render(pattern, os.path.join(d, "off"), "--no-watermark")
            comps = []
            for i in range(args.frames):
                on, off = (os.path.join(d, m, f"facefusion.{i + 1:04d}.exr") for m in ("on", "off"))
                attrs = read_exr(on)[2]
                want = payload_for(attrs["facefusion:source_identity"], attrs["facefusion:render_id"])
                u_on, u_off = frame_srgb(on), frame_srgb(off)
                px, names, _ = read_exr(on)
                matte = px[..., names.index("FaceMatte.A")]
                inside = matte > 0
                mse = np.mean((u_on[inside].astype(np.float64) - u_off[inside]) ** 2)
                psnrs.append(10 * np.log10(255 ** 2 / max(mse, 1e-12)))
                exact &= bool(np.array_equal(u_on[~inside], u_off[~inside]))
                comps.append(u_on)
                regions = faces(u_on)  # the faces as the detector finds them (never the render's own geometry)
                half = cv2.resize(u_on, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
                ok, jpg = cv2.imencode(".jpg", u_on[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 85])
                jpeg = cv2.imdecode(jpg, cv2.IMREAD_COLOR)[..., ::-1]
                for name, img, regs in (("PNG", u_on, regions), ("JPEG q85", jpeg, faces(jpeg)),
                                        ("50 % resize", half, faces(half))):
                    for reg, ev in zip(regs, best_evidence(img, regs), strict=True):
                        tally(stats, (name, size_bin(reg) if name != "50 % resize" else size_bin(
                            cv2.resize(reg.astype(np.uint8), None, fx=2, fy=2) > 0)), ev.payload() == want)
            mp4 = write_movie(comps, os.path.join(d, "comp.mp4"), crf=23)
            evs = [e for f in movie_frames(mp4) for e in best_evidence(f, faces(f))]
            pooled = sum(evs[1:], evs[0]) if evs else None
            for e in evs:
                tally(stats, ("H.264 CRF 23, single face", f"fit {fit}"), e.payload() == want)
            tally(stats, ("H.264 CRF 23, pooled movie", f"fit {fit}"), pooled is not None and pooled.payload() == want)
    print(f"PSNR over matte > 0 (8-bit sRGB): min {min(psnrs):.2f} dB, mean {np.mean(psnrs):.2f} dB; "
          f"pixels outside the matte bit-exact: {exact}")
    for (name, size), (hit, n) in sorted(stats.items()):
        print(f"{name:28s} {size:10s} {hit}/{n} faces decoded")
    false_pos(faces, args.crops)


def false_pos(faces: FaceRegions, n_crops: int) -> None:
    crops = unmarked_crops(per_photo=max(1, (n_crops - 80) // 5))
    faces_seen = false = 0
    for c in crops:
        for ev in best_evidence(c, faces(c)):
            faces_seen += 1
            false += ev.payload() is not None
    print(f"false positives: {false} of {faces_seen} faces in {len(crops)} unmarked crops of real "
          "photos and walkers frames")


if __name__ == "__main__":
    main()
