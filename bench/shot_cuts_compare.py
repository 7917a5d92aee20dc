"""Shot-cut detection: engine/stages/shot_cuts.py against PySceneDetect on real footage and joined clips.

    .venv/bin/python bench/shot_cuts_compare.py [--scenedetect-python /tmp/sdvenv/bin/python]

PySceneDetect runs in a throwaway environment (its 0.7.x needs opencv-python, which would replace the engine's
headless cv2): ``python3.11 -m venv /tmp/sdvenv && /tmp/sdvenv/bin/pip install "scenedetect[opencv-headless]==0.6.7"``.
Every sequence is 480x270 RGB; a result is right when the cuts found equal the true cut frames exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from engine import shots  # noqa: E402
from engine.io import colour  # noqa: E402
from engine.stages.shot_cuts import detect_cuts  # noqa: E402

WALKERS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "walkers_1080p.mp4")
SIZE = (480, 270)
FAST = shots.CameraMove(pan=(300.0, 80.0), zoom=(1.0, 1.5), roll_deg=(0.0, 8.0), exposure_stops=(0.0, 1.5))
WHIP = shots.CameraMove(pan=(1400.0, 0.0), zoom=(1.6, 1.6), roll_deg=(0.0, 0.0), exposure_stops=(0.0, 0.0))
REFRAMED = shots.CameraMove(pan=(-40.0, 10.0), zoom=(1.6, 1.7))

PSD_SCRIPT = r"""
import json, sys, numpy as np, scenedetect, scenedetect.detectors as D
d = np.load(sys.argv[1])
makers = {n: getattr(D, n) for n in ("ContentDetector", "AdaptiveDetector", "HistogramDetector", "HashDetector")
          if hasattr(D, n)}
out = {"version": scenedetect.__version__, "results": {}}
for name, mk in makers.items():
    for k in d.files:
        det, cuts = mk(), []
        for i, f in enumerate(d[k]):
            cuts += det.process_frame(i, np.ascontiguousarray(f[..., ::-1]))
        cuts += (det.post_process(len(d[k]) - 1) or []) if hasattr(det, "post_process") else []
        out["results"].setdefault(name, {})[k] = [int(getattr(c, "frame_num", c)) for c in cuts]
print(json.dumps(out))
"""


def _walkers() -> list[np.ndarray]:
    import av

    with av.open(WALKERS) as c:
        return [cv2.resize(f.to_ndarray(format="rgb24"), SIZE, interpolation=cv2.INTER_AREA) for f in c.decode(video=0)]


def _shot(name: str, n: int, move: shots.CameraMove | None = None) -> list[np.ndarray]:
    frames, _ = shots.render_shot(shots.load_photo_linear(name), SIZE, n, move)
    return [(np.clip(colour.srgb_encode(f[..., :3]), 0, 1) * 255 + 0.5).astype(np.uint8) for f in frames]


def _crop(f: np.ndarray, s: float = 0.6, cx: float = 0.5, cy: float = 0.5) -> np.ndarray:
    h, w = f.shape[:2]
    ch, cw = int(h * s), int(w * s)
    y0, x0 = int((h - ch) * cy), int((w - cw) * cx)
    return cv2.resize(f[y0:y0 + ch, x0:x0 + cw], (w, h), interpolation=cv2.INTER_LINEAR)


def _gain(f: np.ndarray, g: float) -> np.ndarray:
    return np.clip(f.astype(np.float32) * g, 0, 255).astype(np.uint8)


def sequences() -> dict[str, tuple[list[np.ndarray], list[int]]]:
    wk = _walkers()
    return {
        "walkers": (wk, []),
        "t1 camera move": (_shot("t1", 48), []),
        "astronaut fast move": (_shot("astronaut", 48, FAST), []),
        "t1 fast move": (_shot("t1", 24, FAST), []),
        "astronaut whip pan": (_shot("astronaut", 24, WHIP), []),
        "walkers flash frame": (wk[:50] + [_gain(wk[50], 1.8)] + wk[51:], []),
        "walkers lighting step": (wk[:50] + [_gain(f, 1.6) for f in wk[50:]], []),
        "walkers jump cut 0-49 + 104-55": (wk[:50] + wk[104:54:-1], [50]),
        "walkers 0-39 + cropped 60-104": (wk[:40] + [_crop(f) for f in wk[60:105]], [40]),
        "t1 + astronaut": (_shot("t1", 30) + _shot("astronaut", 30), [30]),
        "t1 + t1 reframed": (_shot("t1", 30) + _shot("t1", 30, REFRAMED), [30]),
        "walkers + t1": (wk[:30] + _shot("t1", 30), [30]),
        "walkers left crop + right crop": ([_crop(f, 0.5, 0.1) for f in wk[:35]]
                                           + [_crop(f, 0.5, 0.9) for f in wk[35:70]],
                                           [35]),
        "walkers darker crop": (wk[:40] + [_gain(_crop(f, 0.7, 0.3, 0.3), 0.5) for f in wk[40:80]], [40]),
        "three 8-frame shots": ([_crop(f, 0.5, 0.1) for f in wk[:8]] + [_crop(f, 0.5, 0.9) for f in wk[8:16]]
                                + _shot("t1", 8), [8, 16]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenedetect-python", help="interpreter of a throwaway venv with scenedetect installed")
    args = ap.parse_args()
    seqs = sequences()
    rows: dict[str, dict[str, list[int]]] = {"engine": {}}
    ms = []
    for name, (frames, _) in seqs.items():
        t = time.perf_counter()
        rows["engine"][name] = detect_cuts(frames)
        ms.append((time.perf_counter() - t) / len(frames) * 1000)
    version = ""
    if args.scenedetect_python:
        with tempfile.TemporaryDirectory() as tmp:
            keys = {f"s{i}": name for i, name in enumerate(seqs)}
            path = os.path.join(tmp, "seqs.npz")
            np.savez(path, **{k: np.stack(seqs[n][0]) for k, n in keys.items()})
            res = json.loads(subprocess.run([args.scenedetect_python, "-c", PSD_SCRIPT, path], check=True,
                                            capture_output=True, text=True).stdout)
        version = res["version"]
        for det, found in res["results"].items():
            rows[f"PySceneDetect {version} {det}"] = {keys[k]: v for k, v in found.items()}
    print(f"engine: {np.mean(ms):.1f} ms per 480x270 frame")
    print("| sequence | true cuts | " + " | ".join(rows) + " |")
    print("|---|---|" + "---|" * len(rows))
    for name, (_, truth) in seqs.items():
        cells = [("ok " if r[name] == truth else "WRONG ") + str(r[name]) for r in rows.values()]
        print(f"| {name} | {truth} | " + " | ".join(cells) + " |")
    print("| right | | " + " | ".join(f"{sum(r[n] == t for n, (_, t) in seqs.items())}/{len(seqs)}"
                                     for r in rows.values()) + " |")


if __name__ == "__main__":
    main()
