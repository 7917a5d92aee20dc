"""Warp faces back into the frame and build the outputs: premultiplied face layer, mattes, composite.

Where the overall matte is 0 the composite is the original plate, bit for bit: plate pixels are never
re-converted or re-computed there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.stages.align import paste_region, warp_back
from engine.stages.plate_texture import PlateTexture


@dataclass
class FrameLayers:
    face: np.ndarray  # (H, W, 4) premultiplied RGBA: swapped face x matte, A = matte
    mattes: dict[str, np.ndarray] = field(default_factory=dict)  # "FaceMatte" overall + one per face

    @property
    def matte(self) -> np.ndarray:
        return self.face[..., 3]


def empty_layers(h: int, w: int) -> FrameLayers:
    return FrameLayers(face=np.zeros((h, w, 4), np.float32))


def paste_face(layers: FrameLayers, crop_lin: np.ndarray, crop_matte: np.ndarray, m: np.ndarray,
               name: str, texture: PlateTexture | None = None, plate: np.ndarray | None = None) -> None:
    """Add one face (linear crop + its crop-space matte, frame->crop matrix m) 'over' the layers so far.
    ``texture`` with ``plate`` (the frame's linear RGB, the crop's gamut): the plate's fine skin texture exchanged
    in at the plate's own pixels (engine.stages.plate_texture)."""
    if texture is not None and plate is None:
        raise ValueError("a plate texture needs the plate frame: pass plate= (the frame's linear RGB)")
    h, w = layers.face.shape[:2]
    size = crop_lin.shape[0]
    region = paste_region(m, size, (h, w))
    face_matte = np.zeros((h, w), np.float32)
    if region is not None:
        x0, y0, x1, y1 = region
        rgb = warp_back(crop_lin, m, region)
        if texture is not None:
            rgb = texture.apply(rgb, plate[y0:y1, x0:x1, :3], m, region)
        a = np.clip(warp_back(crop_matte, m, region), 0.0, 1.0)
        roi = layers.face[y0:y1, x0:x1]
        keep = 1.0 - a
        roi[..., :3] = rgb * a[..., None] + roi[..., :3] * keep[..., None]
        roi[..., 3] = a + roi[..., 3] * keep
        face_matte[y0:y1, x0:x1] = a
    layers.mattes[name] = face_matte


def composite(plate_rgba: np.ndarray, layers: FrameLayers) -> np.ndarray:
    """face over plate; exactly the plate wherever the matte is 0."""
    a = layers.matte
    out = plate_rgba.copy()
    rows, cols = np.flatnonzero((a > 0).any(axis=1)), np.flatnonzero((a > 0).any(axis=0))
    if rows.size:  # only the faces' box is gathered (a 1080p frame's boolean gather cost 20 ms a pass)
        composite_box(out, plate_rgba, layers, np.s_[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1])
    return out


def composite_box(out: np.ndarray, plate_rgba: np.ndarray, layers: FrameLayers, box: tuple[slice, slice]) -> None:
    """``composite`` over ``box`` alone, into ``out``: after a change to the face layer inside the box (the
    watermark), the rest of a composite stays as it was."""
    inside = layers.matte[box] > 0
    pa = plate_rgba[box][inside]
    fa = layers.face[box][inside]
    o = out[box]
    o[inside, :3] = fa[:, :3] + pa[:, :3] * (1.0 - fa[:, 3:4])
    o[inside, 3] = fa[:, 3] + pa[:, 3] * (1.0 - fa[:, 3])


def paste_matte(mattes: dict[str, np.ndarray], name: str, crop_matte: np.ndarray, m: np.ndarray,
                frame_shape: tuple[int, int]) -> None:
    """Accumulate a crop-space matte into the frame-size layer ``name`` (union of all faces)."""
    h, w = frame_shape
    layer = mattes.setdefault(name, np.zeros((h, w), np.float32))
    region = paste_region(m, crop_matte.shape[0], (h, w))
    if region is None:
        return
    x0, y0, x1, y1 = region
    a = np.clip(warp_back(crop_matte.astype(np.float32), m, region), 0.0, 1.0)
    layer[y0:y1, x0:x1] = a + layer[y0:y1, x0:x1] * (1.0 - a)
