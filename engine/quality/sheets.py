"""PNG contact sheets of a quality report: whole frames (plate | composite | matte overlay | reference) and
before/after crops of every measured face."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import cv2
import numpy as np

from engine.io import atomic
from engine.io.colour import srgb_encode
from engine.quality.faces import FoundFace, to_u8

if TYPE_CHECKING:  # the report imports this module; only the type is needed here
    from engine.quality.report import FaceRow, Run

SHEET_FRAMES = 6
TILE_W = 480
FACE_TILE = 160


def _u8(lin: np.ndarray) -> np.ndarray:
    return to_u8(srgb_encode(lin))


def _label(img: np.ndarray, text: str) -> np.ndarray:
    img = np.ascontiguousarray(img)
    cv2.putText(img, text, (6, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 0, 0), 3, cv2.LINE_AA)
    cv2.putText(img, text, (6, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 0), 1, cv2.LINE_AA)
    return img


def _fit(img: np.ndarray, width: int) -> np.ndarray:
    s = width / img.shape[1]
    return cv2.resize(img, (width, max(1, int(round(img.shape[0] * s)))), interpolation=cv2.INTER_AREA)


def overlay(plate_u8: np.ndarray, matte: np.ndarray) -> np.ndarray:
    """The plate with the matte tinted magenta and its 0.5 contour drawn."""
    out = plate_u8.astype(np.float32)
    tint = np.array([255.0, 0.0, 255.0])
    out = out * (1 - 0.45 * matte[..., None]) + tint * 0.45 * matte[..., None]
    out = np.clip(out, 0, 255).astype(np.uint8)
    contours, _ = cv2.findContours((matte >= 0.5).astype(np.uint8), cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
    cv2.drawContours(out, contours, -1, (255, 255, 0), 1)
    return out


def sampled(frames: list[int]) -> list[int]:
    if len(frames) <= SHEET_FRAMES:
        return frames
    return [frames[int(round(i))] for i in np.linspace(0, len(frames) - 1, SHEET_FRAMES)]


def _write(path: str, rgb: np.ndarray) -> None:
    with atomic.private_path(path) as tmp:  # OpenCV opens by name: never through a link at the sheet's name
        if not cv2.imwrite(tmp, np.ascontiguousarray(rgb[..., ::-1])):
            raise OSError(f"cannot write the contact sheet '{path}'")


def write_frame_sheet(path: str, plates: dict[int, np.ndarray], run: Run, ref: Run | None) -> None:
    rows = []
    for f in sampled(sorted(run.results)):
        plate = _u8(plates[f])
        tiles = [_label(_fit(plate, TILE_W), f"plate {f}"), _label(_fit(_u8(run.results[f]), TILE_W), "engine"),
                 _label(_fit(overlay(plate, run.mattes[f]), TILE_W), "FaceMatte")]
        if ref is not None:
            tiles.append(_label(_fit(_u8(ref.results[f]), TILE_W), ref.name))
        rows.append(np.hstack(tiles))
    if rows:
        _write(path, np.vstack(rows))


def _face_crop(img: np.ndarray, box: np.ndarray, tile: int = FACE_TILE) -> np.ndarray:
    x0, y0, x1, y1 = box
    cx, cy, half = (x0 + x1) / 2, (y0 + y1) / 2, 0.8 * max(x1 - x0, y1 - y0)
    s = tile / (2 * half)
    m = np.array([[s, 0, tile / 2 - cx * s], [0, s, tile / 2 - cy * s]])
    # Small faces are enlarged: nearest neighbour shows their real pixels (AREA would blur them).
    interp = cv2.INTER_AREA if s < 1 else cv2.INTER_NEAREST
    return cv2.warpAffine(img, m, (tile, tile), flags=interp, borderMode=cv2.BORDER_CONSTANT)


def write_face_sheet(path: str, plates: dict[int, np.ndarray], faces: dict[int, list[FoundFace]], run: Run,
                     ref: Run | None, max_faces: int = 24) -> None:
    rows = []
    measured = {(r.frame, tuple(r.box)) for r in run.faces}
    for f in sampled(sorted(run.results)):
        for face in faces.get(f, []):
            if (f, tuple(face.box)) not in measured or len(rows) >= max_faces:
                continue
            tiles = [_label(_face_crop(_u8(plates[f]), face.box), f"plate {f}"),
                     _label(_face_crop(_u8(run.results[f]), face.box), "engine")]
            if ref is not None:
                tiles.append(_label(_face_crop(_u8(ref.results[f]), face.box), "reference"))
            rows.append(np.hstack(tiles))
    if rows:
        per_row = min(3, len(rows))
        blank = np.zeros_like(rows[0])
        rows += [blank] * (-len(rows) % per_row)
        _write(path, np.vstack([np.hstack(rows[i:i + per_row]) for i in range(0, len(rows), per_row)]))


def write_face_crops(folder: str, frame: int, plate: np.ndarray, faces: list[FoundFace], result: np.ndarray,
                     matte: np.ndarray, rows: list[FaceRow], ref: np.ndarray | None, tile: int = 256) -> int:
    """One PNG per measured face of a frame, ``f<frame>_x<x0>_y<y0>_w<width>.png``: plate | engine | matte
    overlay | reference crops at ``tile`` px, the evidence to look at face by face. Returns how many were
    written."""
    os.makedirs(folder, exist_ok=True)
    by_box = {tuple(r.box): r for r in rows}
    measured = [(f, by_box[tuple(f.box)]) for f in faces if tuple(f.box) in by_box]
    if not measured:
        return 0
    plate_u8, result_u8 = _u8(plate), _u8(result)
    matte_u8, ref_u8 = overlay(plate_u8, matte), None if ref is None else _u8(ref)
    written = 0
    for face, row in measured:
        tiles = [_label(_face_crop(plate_u8, face.box, tile), f"plate {frame}"),
                 _label(_face_crop(result_u8, face.box, tile), f"engine dE {row.de76:.1f}"),
                 _label(_face_crop(matte_u8, face.box, tile), "FaceMatte")]
        if ref_u8 is not None:
            tiles.append(_label(_face_crop(ref_u8, face.box, tile), "reference"))
        x0, y0, x1, _ = (int(round(v)) for v in face.box)
        _write(os.path.join(folder, f"f{frame:04d}_x{x0}_y{y0}_w{x1 - x0}.png"), np.hstack(tiles))
        written += 1
    return written


def write_zoom_crops(folder: str, frame: int, plate: np.ndarray, faces: list[FoundFace], result: np.ndarray,
                     rows: list[FaceRow], ref: np.ndarray | None, zoom: int = 3) -> int:
    """One PNG per measured face of a frame, ``f<frame>_x<x0>_y<y0>.png``: plate | engine | reference of the face's
    box grown by 0.15 of its width, each plate pixel drawn as ``zoom`` x ``zoom`` screen pixels (nearest: creases,
    speckle and pale irises show as they are, not smoothed away). Returns how many were written."""
    os.makedirs(folder, exist_ok=True)
    boxes = {tuple(r.box) for r in rows}
    images = [("plate", _u8(plate)), ("engine", _u8(result))] + ([] if ref is None else [("reference", _u8(ref))])
    written = 0
    for face in faces:
        if tuple(face.box) not in boxes:
            continue
        x0, y0, x1, y1 = face.box
        g = 0.15 * (x1 - x0)
        h, w = plate.shape[:2]
        ys = slice(max(int(y0 - g), 0), min(int(np.ceil(y1 + g)), h))
        xs = slice(max(int(x0 - g), 0), min(int(np.ceil(x1 + g)), w))
        tiles = [_label(np.repeat(np.repeat(img[ys, xs], zoom, 0), zoom, 1), f"{name} {frame} x{zoom}")
                 for name, img in images]
        _write(os.path.join(folder, f"f{frame:04d}_x{int(round(x0))}_y{int(round(y0))}.png"), np.hstack(tiles))
        written += 1
    return written
