"""Issue 33 on the watermark: a wide face marked in the mixed layout against its blocks alone (the layout a face
BLOCKS_ONLY_FROM wide gets now): the lift's energy in the skin's texture band, its PSNR over the matte, and the
reader's z from the picture, a JPEG q85 and a half-size copy. A real photo from ../shared/data as a 640x640 frame;
the matte is the detector's face region dilated, marked the way a render marks its face layer.

    .venv/bin/python bench/watermark_wide.py
"""

from __future__ import annotations

import os
import sys

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine import shots  # noqa: E402
from engine.io import colour  # noqa: E402
from engine.quality import texture  # noqa: E402
from engine.watermark.detect import FaceRegions  # noqa: E402
from engine.watermark.payload import Payload, encode  # noqa: E402
from engine.watermark.read import best_evidence  # noqa: E402
from tests.shared_data import path as shared  # noqa: E402
from tests.test_watermark_wide import _mark  # noqa: E402


def main() -> int:
    img = cv2.imread(shared("photos", "angelina_jolie.jpg"))[..., ::-1]
    lin = colour.srgb_decode(cv2.resize(img, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA) / 255.0)
    move = shots.CameraMove(pan=(8, 3), zoom=(1.0, 1.02), roll_deg=(0, 0.3), exposure_stops=(0, 0))
    plate = shots.render_shot(lin.astype(np.float32), (640, 640), 2, move, fit=1.0)[0][0]
    faces = FaceRegions()
    bits = encode(Payload(0xFA, 0x5A1, 0x0C3))
    (region,) = faces(colour.to_u8(colour.srgb_encode(plate[..., :3])))
    matte = cv2.dilate(region.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(np.float32)
    inside = cv2.erode((matte > 0).astype(np.uint8), np.ones((15, 15), np.uint8)) > 0
    plain_band = texture.band(plate[..., :3])
    print(f"matte {int(np.ptp(np.nonzero(matte)[1])) + 1} px wide")
    print("| layout | band energy | PSNR over the matte | z: PNG / JPEG q85 / half size |\n|---|---:|---:|---|")
    for name, wide_from in (("mixed (before)", 10 ** 6), ("blocks alone", None)):
        marked = _mark(plate, matte, bits, wide_from)
        energy = float(((texture.band(marked) - plain_band)[inside] ** 2).mean())
        diff = (colour.srgb_encode(np.clip(marked, 0, 1)) - colour.srgb_encode(np.clip(plate[..., :3], 0, 1))) * 255
        psnr = 10 * np.log10(255 ** 2 / float((diff[matte > 0] ** 2).mean()))
        png = colour.to_u8(colour.srgb_encode(marked))
        jpg = cv2.imdecode(cv2.imencode(".jpg", png[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 85])[1], 1)[..., ::-1]
        half = cv2.resize(png, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
        zs = [best_evidence(i, faces(i))[0].z for i in (png, np.ascontiguousarray(jpg), half)]
        print(f"| {name} | {energy:.4f} | {psnr:.2f} dB | " + " / ".join(f"{z:.2f}" for z in zs) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
