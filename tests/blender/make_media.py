"""Write the Blender tests' media with the engine's environment (Blender's venv must not get cv2/OIIO).

    <engine python> tests/blender/make_media.py OUT [--frames 4] [--size 192]

OUT/plate/plate.0001.png ... (and the same as OUT/plate.mp4): 8-bit sRGB frames of scikit-image's
astronaut seen through a slowly moving camera (so a one-frame misalignment shows);
OUT/source.png: a colour portrait from ../shared/data/photos (the new face), 384 px on its long side. Not
insightface's Tom Hanks photo: it is grey (a*, b* = 0), and the geometric swapper takes no face from a photo whose
skin has no skin colour (engine/stages/source_region.plausible_skin), so nothing would be replaced.
Prints a JSON line with the paths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import cv2  # noqa: E402

from engine import shots  # noqa: E402
from tests import shared_data  # noqa: E402

PORTRAIT = shared_data.path("photos", "paul_rudd.jpg")  # frontal, plain backdrop
SOURCE_SIDE = 384


def write_source(path: str) -> None:
    image = cv2.imread(PORTRAIT)
    if image is None:
        raise SystemExit(f"cannot read {PORTRAIT}: the shared test photos are missing (../shared/data/README.md)")
    scale = SOURCE_SIDE / max(image.shape[:2])
    size = (round(image.shape[1] * scale), round(image.shape[0] * scale))
    cv2.imwrite(path, cv2.resize(image, size, interpolation=cv2.INTER_AREA))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--size", type=int, default=192)
    args = ap.parse_args()
    photo = shots.load_photo_linear("astronaut")[20:300, 90:370]  # head and shoulders
    move = shots.CameraMove(pan=(6.0 * args.frames, 0.0), zoom=(1.0, 1.0), roll_deg=(0.0, 0.0),
                            exposure_stops=(0.0, 0.0))
    frames, _ = shots.render_shot(photo, (args.size, args.size), args.frames, move)
    pattern = shots.write_sequence(frames, os.path.join(args.out, "plate"), ext="png")
    movie = shots.write_movie(frames, os.path.join(args.out, "plate.mp4"), fps=24)
    write_source(os.path.join(args.out, "source.png"))
    print(json.dumps({"plate": pattern, "movie": movie, "source": os.path.join(args.out, "source.png"),
                      "frames": args.frames}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
