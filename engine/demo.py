"""``python -m engine demo``: the main job on the embedded default, from nothing but installed packages.

Builds a moving-camera shot from insightface's t1.jpg (six faces) as a linear EXR sequence, swaps every face
for the astronaut from scikit-image, writes the EXRs and a PNG contact sheet of before/after frames.
"""

from __future__ import annotations

import os

import cv2
import numpy as np

from engine import consent, shots
from engine.io import colour
from engine.io.exr import read_exr
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.progress import ProgressPrinter


def contact_sheet(before: list[np.ndarray], after: list[np.ndarray], path: str, width: int = 480) -> str:
    """Rows of (plate, composite) pairs as an 8-bit sRGB PNG."""
    rows = []
    for b, a in zip(before, after, strict=True):
        pair = [_thumb(b, width), _thumb(a, width)]
        rows.append(np.hstack([pair[0], np.full((pair[0].shape[0], 8, 3), 255, np.uint8), pair[1]]))
    sheet = np.vstack([np.vstack([r, np.full((8, r.shape[1], 3), 255, np.uint8)]) for r in rows])
    cv2.imwrite(path, sheet[..., ::-1])
    return path


def _thumb(rgba_lin: np.ndarray, width: int) -> np.ndarray:
    srgb = np.clip(colour.srgb_encode(rgba_lin[..., :3]), 0, 1)
    h = int(round(srgb.shape[0] * width / srgb.shape[1]))
    return (cv2.resize(srgb, (width, h), interpolation=cv2.INTER_AREA) * 255 + 0.5).astype(np.uint8)


def run_demo(out: str, n_frames: int = 8, quiet: bool = False) -> int:
    out = os.path.abspath(out)
    plate_dir = os.path.join(out, "plate")
    print(f"building a {n_frames}-frame 1280x720 linear EXR shot from insightface's t1.jpg ...")
    frames, _ = shots.render_shot(shots.load_photo_linear("t1"), (1280, 720), n_frames, fit=1.05)
    pattern = shots.write_sequence(frames, plate_dir)
    source = shots.write_photo("astronaut", out)
    # Consent is never assumed (issue 14): the demo confirms it for its public-domain source, visibly.
    note = "demo: scikit-image's astronaut photo (Eileen Collins, NASA, public domain)"
    consent.grant(consent.identity_digest([ImageInput(path=source)]), note)
    print(f"consent recorded for the demo's source identity: {note}")
    exr_dir = os.path.join(out, "exr")
    job = SwapJob(sources=[ImageInput(path=source)], plate=ImageInput(path=pattern), output_dir=exr_dir,
                  settings={"face_selector": "all", "output_mode": "composite"})
    printer = ProgressPrinter(quiet=quiet)
    summary = Engine().run(job, printer)
    printer.close()
    picks = sorted({0, n_frames // 3, 2 * n_frames // 3, n_frames - 1})
    after = [read_exr(os.path.join(exr_dir, f"facefusion.{i + 1:04d}.exr"))[0][..., :4] for i in picks]
    sheet = contact_sheet([frames[i] for i in picks], after, os.path.join(out, "contact_sheet.png"))
    print(f"swapped {summary['frames']} frames in {summary['seconds']:.1f} s")
    print(f"plate:         {pattern}")
    print(f"EXRs:          {exr_dir}{os.sep}facefusion.####.exr  (RGBA composite + FaceMatte.A, Face<n>.A)")
    print(f"contact sheet: {sheet}  (left: plate, right: result)")
    return 0
