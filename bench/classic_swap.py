"""The classic CPU face swap, as tutorials write it: dlib's HOG detector and 68 landmarks, a Delaunay warp of the
source photo and OpenCV's seamlessClone, on the largest face of each frame, 8-bit PNGs out. The reference row of
issue 32's throughput cases (bench/throughput.py --suite speed): it swaps one face a frame, the engine all of them.

Usage: .venv/bin/python bench/classic_swap.py SOURCE.jpg PLATE.mp4 FIRST LAST OUT_DIR
"""

from __future__ import annotations

import os
import sys

import av
import cv2
import dlib
import face_recognition_models
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.quality.reference_poisson import poisson_swap  # noqa: E402


def landmarks(detector, predictor, rgb: np.ndarray) -> np.ndarray | None:
    """The largest face's 68 points, or None."""
    faces = detector(rgb, 1)  # upsampled once, as the tutorials call it: the walkers faces are 60-100 px
    if not faces:
        return None
    box = max(faces, key=lambda r: r.width() * r.height())
    shape = predictor(rgb, box)
    return np.array([[p.x, p.y] for p in shape.parts()], np.float64)


def main() -> int:
    if len(sys.argv) != 6:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    source, plate, first, last, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    detector = dlib.get_frontal_face_detector()
    predictor = dlib.shape_predictor(face_recognition_models.pose_predictor_model_location())
    src = cv2.cvtColor(cv2.imread(source, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    src_lm = landmarks(detector, predictor, src)
    if src_lm is None:
        print(f"no face in {source}", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    with av.open(plate) as movie:
        for i, frame in enumerate(movie.decode(video=0), start=1):  # 1-based, as the engine numbers a movie
            if i > last:
                break
            if i < first:
                continue
            rgb = frame.to_ndarray(format="rgb24")
            lm = landmarks(detector, predictor, rgb)
            result = rgb if lm is None else poisson_swap(src, src_lm, rgb, lm)[0]
            cv2.imwrite(os.path.join(out, f"classic.{i:04d}.png"), cv2.cvtColor(result, cv2.COLOR_RGB2BGR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
