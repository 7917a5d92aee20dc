"""Test and demo shots made from real photos that installed packages ship, with known camera motion.

insightface ships ``t1.jpg`` (six faces) and a 112 px face; scikit-image ships ``astronaut``. A shot is the
photo seen through a moving camera (pan, zoom, slight roll, exposure ramp), rendered in scene-linear light,
so tracking and temporal stability can be measured against the known motion.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

import cv2
import numpy as np

from engine.errors import EngineError
from engine.io import colour
from engine.io.exr import write_exr

PHOTOS = {
    "t1": ("insightface", "data/images/t1.jpg"),
    "tom_hanks": ("insightface", "data/images/Tom_Hanks_54745.png"),
    "astronaut": ("skimage", "data/astronaut.png"),
}


def photo_path(name: str) -> str:
    package, rel = PHOTOS[name]
    spec = importlib.util.find_spec(package)  # located, never imported: we only read the file it ships
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(f"the package {package} (which ships the photo '{name}') is not installed",
                          "run 'make env'")
    return os.path.join(spec.submodule_search_locations[0], rel)


def load_photo_linear(name: str) -> np.ndarray:
    bgr = cv2.imread(photo_path(name), cv2.IMREAD_COLOR)
    return colour.srgb_decode(bgr[..., ::-1].astype(np.float32) / 255.0)


@dataclass
class CameraMove:
    pan: tuple[float, float] = (60.0, 20.0)  # total shift of the view centre in photo pixels
    zoom: tuple[float, float] = (1.0, 1.12)  # start, end magnification
    roll_deg: tuple[float, float] = (0.0, 3.0)
    exposure_stops: tuple[float, float] = (0.0, 0.5)


def camera_matrices(photo_shape: tuple[int, int], out_size: tuple[int, int], n: int, move: CameraMove,
                    fit: float = 1.0) -> list[np.ndarray]:
    """Photo -> frame affine per frame. ``fit`` scales the photo relative to filling the frame."""
    ph, pw = photo_shape
    w, h = out_size
    base = max(w / pw, h / ph) * fit
    mats = []
    for i in range(n):
        t = i / max(n - 1, 1)
        z = move.zoom[0] + (move.zoom[1] - move.zoom[0]) * t
        ang = np.deg2rad(move.roll_deg[0] + (move.roll_deg[1] - move.roll_deg[0]) * t)
        cx = pw / 2 + move.pan[0] * t
        cy = ph / 2 + move.pan[1] * t
        s = base * z
        c, si = np.cos(ang) * s, np.sin(ang) * s
        m = np.array([[c, -si, 0.0], [si, c, 0.0]])
        m[:, 2] = np.array([w / 2, h / 2]) - m[:, :2] @ np.array([cx, cy])
        mats.append(m)
    return mats


def render_shot(photo_lin: np.ndarray, out_size: tuple[int, int], n: int, move: CameraMove | None = None,
                fit: float = 1.0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(frames as float32 linear RGBA, photo->frame matrices)."""
    move = move or CameraMove()
    mats = camera_matrices(photo_lin.shape[:2], out_size, n, move, fit)
    frames = []
    for i, m in enumerate(mats):
        t = i / max(n - 1, 1)
        gain = 2.0 ** (move.exposure_stops[0] + (move.exposure_stops[1] - move.exposure_stops[0]) * t)
        rgb = cv2.warpAffine(photo_lin, m, out_size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        rgba = np.ones((out_size[1], out_size[0], 4), np.float32)
        rgba[..., :3] = rgb * gain
        frames.append(rgba)
    return frames, mats


def write_sequence(frames: list[np.ndarray], folder: str, name: str = "plate", ext: str = "exr",
                   first: int = 1) -> str:
    """Write frames as name.####.ext (EXR: half linear; PNG/JPEG: 8-bit sRGB). Returns the #### pattern."""
    os.makedirs(folder, exist_ok=True)
    for i, rgba in enumerate(frames):
        path = os.path.join(folder, f"{name}.{first + i:04d}.{ext}")
        if ext == "exr":
            write_exr(path, rgba, {}, interop_id="lin_rec709_scene", attributes={})
        else:
            srgb = (np.clip(colour.srgb_encode(rgba[..., :3]), 0, 1) * 255 + 0.5).astype(np.uint8)
            cv2.imwrite(path, np.ascontiguousarray(srgb[..., ::-1]))
    return os.path.join(folder, f"{name}.{'#' * 4}.{ext}")


def write_movie(frames: list[np.ndarray], path: str, fps: int = 24, gop: int | None = None) -> str:
    """An H.264 (or MPEG-4 where x264 is missing) movie of the frames, 8-bit sRGB; ``gop``: key frame interval."""
    import av

    with av.open(path, "w") as container:
        try:
            stream = container.add_stream("libx264", rate=fps)
            stream.options = {"crf": "12", "preset": "veryfast"}
        except Exception:  # PyAV raises several types for a missing encoder
            stream = container.add_stream("mpeg4", rate=fps)
        stream.width = frames[0].shape[1]
        stream.height = frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        if gop:
            stream.codec_context.gop_size = gop
        for rgba in frames:
            rgb = (np.clip(colour.srgb_encode(rgba[..., :3]), 0, 1) * 255 + 0.5).astype(np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def write_photo(name: str, folder: str, max_side: int | None = None) -> str:
    """A copy of a shipped photo as PNG (optionally downscaled), for use as a source."""
    bgr = cv2.imread(photo_path(name), cv2.IMREAD_COLOR)
    if max_side and max(bgr.shape[:2]) > max_side:
        s = max_side / max(bgr.shape[:2])
        bgr = cv2.resize(bgr, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.png")
    cv2.imwrite(path, bgr)
    return path
