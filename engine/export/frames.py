"""Our EXRs as 8-bit sRGB deliverables: the composite (or the face layer over its plate), through the same
conversion the watermark was set in, written atomically."""

from __future__ import annotations

import os
from collections.abc import Iterable

import cv2
import numpy as np

from engine.errors import EngineError
from engine.io import atomic, colour
from engine.io.exr import read_exr

IMAGE_EXT = {".png": [], ".jpg": [cv2.IMWRITE_JPEG_QUALITY, 95], ".jpeg": [cv2.IMWRITE_JPEG_QUALITY, 95],
             ".tif": [], ".tiff": []}


def frame_srgb(exr: str, plate: np.ndarray | None = None) -> np.ndarray:
    """8-bit sRGB (H, W, 3) of an EXR: its RGBA as is (a composite), or Alpha Over ``plate`` (linear RGBA, same
    gamut) for a face layer."""
    try:
        px, names, attrs = read_exr(exr)
    except (ValueError, TypeError) as exc:  # a header that reads but pixels that do not (a truncated file)
        raise EngineError(f"the pixels of '{exr}' cannot be read ({exc})", "the EXR is truncated or damaged; "
                          "render that frame again") from None
    idx = {n: i for i, n in enumerate(names)}
    rgba = px[..., [idx["R"], idx["G"], idx["B"], idx["A"]]]
    if plate is not None:
        if plate.shape[:2] != rgba.shape[:2]:
            raise EngineError(f"the plate frame is {plate.shape[1]}x{plate.shape[0]}, {exr} is "
                              f"{rgba.shape[1]}x{rgba.shape[0]}", "give the plate the EXRs were rendered from")
        rgba = rgba + plate[..., :4] * (1.0 - rgba[..., 3:4])
    gamut = {v: k for k, v in colour.GAMUT_INTEROP.items()}.get(attrs.get("colorInteropID", ""), "rec709")
    return colour.to_u8(colour.linear_to_model(rgba[..., :3], gamut))


def write_image(rgb_u8: np.ndarray, path: str, quality: int | None = None) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in IMAGE_EXT:
        raise EngineError(f"cannot export to '{ext}'", "use .png, .jpg, .tif or .mp4")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    params = [cv2.IMWRITE_JPEG_QUALITY, quality] if quality and ext in (".jpg", ".jpeg") else IMAGE_EXT[ext]
    with atomic.private_path(path) as tmp:  # OpenCV opens by name: a private 0700 folder, never a planted link
        if not cv2.imwrite(tmp, np.ascontiguousarray(rgb_u8[..., ::-1]), params):
            raise EngineError(f"could not write {path}", "check the folder and the free space")
    return path


def write_movie(frames: Iterable[np.ndarray], path: str, fps: float = 25.0, crf: int = 23, tune: str = "grain"
                ) -> str:
    """H.264 (yuv420p, CRF ``crf``) of 8-bit sRGB frames. x264's ``grain`` tuning keeps the fine, low-contrast
    detail its default quantisation flattens; the invisible watermark survives CRF 23 either way when a movie is
    read whole, with about twice the evidence under ``grain`` (bench/RESULTS.md)."""
    import av

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic.private_path(path) as tmp, av.open(tmp, "w") as box:  # PyAV opens by name: a private 0700 folder
        stream = None
        for rgb in frames:
            if stream is None:
                stream = box.add_stream("libx264", rate=round(fps))
                stream.options = {"crf": str(crf), "preset": "medium", **({"tune": tune} if tune != "none" else {})}
                stream.width, stream.height = rgb.shape[1] // 2 * 2, rgb.shape[0] // 2 * 2
                stream.pix_fmt = "yuv420p"
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[:stream.height, :stream.width]),
                                               format="rgb24")
            for packet in stream.encode(frame):
                box.mux(packet)
        if stream is None:
            raise EngineError("no frames to export", "check the frame range")
        for packet in stream.encode():
            box.mux(packet)
    return path
