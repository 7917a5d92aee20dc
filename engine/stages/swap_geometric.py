"""The built-in geometric swapper: the source face warped onto the target's landmark geometry.

Piecewise affine over a fixed triangulation, done as one dense remap: over MediaPipe's 468-point mesh when both the
source photo and the target face have it (engine/stages/mesh_warp.py), else over 68 landmarks plus 10 forehead
points (landmarkers without a mesh: dlib, 2dfan4, 2d106).
Works everywhere, on the CPU, with no download. Optionally keeps the target's own mouth and eye openings, so
blinks and speech survive the swap. Only the source photo's own face is used: its source-region mask
(skin and features, not hair, backdrop, ears or glasses) is warped with the face and narrows the matte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from engine.stages import blur, geometry68, mesh_warp
from engine.stages import mesh_regions as mr
from engine.stages.align import FFHQ_TEMPLATE, held_cubic, neighbour_range, similarity, transform_points
from engine.stages.contracts import SourceIdentity, SwapInput, SwapOutput
from engine.stages.mesh_warp import eye_with_opening
from engine.stages.source_region import source_region_mask

# With keep_eyes_mouth, the eye openings are warped onto the target's eye contour (blinks and squints follow)
# but filled from the source, and the whole mouth, lips and interior, is the plate's (an open mouth stays open).
# Eyes kept from the plate (KEEP_EYES) cost identity, and the source's lashes met the plate's eyes as dark rings
# (values: bench/QUALITY.md, 'Where the constants came from').
KEEP_EYES = False
# An open mouth's lips are kept grown by this share of the face (mesh path), so their edges are the plate's too;
# wider cost identity (values: bench/QUALITY.md, 'Where the constants came from').
MESH_LIPS_GROW = 0.04
# mouth_openness's ramp, inner-lip gap over eye distance: 0 at OPEN_FROM, 1 at OPEN_FROM + OPEN_SPAN. A steeper one
# took a photo's lips parted by a hair for the plate's (values: bench/QUALITY.md, 'Where the constants came from').
OPEN_FROM, OPEN_SPAN = 0.01, 0.04
LIPS_GROW = 0.04  # the same on the 68-point path (wider turned identity to the original; see bench/QUALITY.md)
# The warp over the 468-point mesh (mesh_warp.py) is built but off by default: it left a turned, looking-down
# face's eyes and brows soft (a tracked mesh is the suspect); it comes on once that is found
# (values: bench/QUALITY.md, 'Where the constants came from').
MESH_WARP = False


@dataclass(frozen=True)
class SourceView:
    """One source photo cut for a target crop, and its share of the face (two photos share a face whose head turn
    lies between theirs: engine.sources.SourceViews)."""

    weight: float
    crop: np.ndarray  # sRGB (S, S, 3)
    points: np.ndarray  # (78, 2) in the crop: 68 landmarks and the forehead
    mesh: np.ndarray | None = None  # (468, 3) in the crop, or None (a landmarker without a mesh)


# (crop size, target face size in plate px, target head turn (geometry68.turn)) -> the views, weights summing to 1
SourceProvider = Callable[[int, float, float], list[SourceView]]


class GeometricSwapper:
    template = FFHQ_TEMPLATE
    size = 0  # any: the crop size follows the target face

    def __init__(self, entry: Any, runtime: Any = None, *, source_texture: SourceProvider,
                 keep_eyes_mouth: bool = True, shape_transfer: float = 0.8) -> None:
        self.id = entry.id
        self._source = source_texture  # the job offers its SourceViews' bound ``get``
        self.keep_eyes_mouth = keep_eyes_mouth
        self.shape_transfer = shape_transfer
        # per source image (by id), like the region: a triangulation of whichever face a job saw first would make
        # a frame's pixels depend on the job's frame range (Delaunay picks differently on near-cocircular points)
        self._tris: dict[int, np.ndarray] = {}
        self._mesh_tris: dict[int, np.ndarray] = {}
        self.last_path = ""  # "mesh" or "68": which warp the last face took (tests, reports)
        self._region: dict[int, np.ndarray] = {}  # per source crop (by id): where it shows its own face
        self._ranges: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per source crop: its held_cubic range

    def swap(self, batch: SwapInput, source: SourceIdentity) -> SwapOutput:
        out = np.empty_like(batch.crops)
        keep = np.zeros(batch.crops.shape[:3], np.float32)
        region = np.zeros(batch.crops.shape[:3], np.float32)
        meshes = batch.meshes if batch.meshes is not None else [None] * len(batch.crops)
        mouths = batch.mouth_open if batch.mouth_open is not None else [None] * len(batch.crops)
        turns = batch.turns if batch.turns is not None else [None] * len(batch.crops)
        for i, (crop, lm, mesh) in enumerate(zip(batch.crops, batch.landmarks, meshes, strict=True)):
            if lm is None:
                raise ValueError("the geometric swapper needs 68 target landmarks")
            out[i], keep[i], region[i] = self.swap_one(crop, lm, float(batch.face_sizes[i]), mesh, mouths[i],
                                                       turns[i])
        return SwapOutput(crops=out, keep=keep, source_region=region)

    def swap_one(self, target: np.ndarray, target_lm68: np.ndarray, face_size: float,
                 target_mesh: np.ndarray | None = None, mouth_open: float | None = None,
                 turn: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(swapped crop, mask of target features to restore after the lighting step, source-region mask: where
        the swap shows the source's own face; 0 on its hair, backdrop, ears and outside the warped mesh).
        ``mouth_open``: how open the target's mouth is (0-1, held along its track); None reads the landmarks. The
        mesh warp (MESH_WARP, off) reads its own lips from the meshes instead. ``turn``: the target's head turn (held
        along its track); None reads the landmarks.

        With several source photos, the one whose head turn is nearest the target's paints it; between two, both
        are warped onto one shape (their destinations averaged) and cross-faded, so a turning head never pops."""
        size = target.shape[0]
        opening = mouth_openness(target_lm68) if mouth_open is None else float(mouth_open)
        views = self._source(size, face_size, geometry68.turn(target_lm68) if turn is None else float(turn))
        use_mesh = MESH_WARP and target_mesh is not None and all(v.mesh is not None for v in views)
        self.last_path = "mesh" if use_mesh else "68"
        if use_mesh:
            dsts = [mesh_warp.destination(target_mesh, v.mesh, self.shape_transfer, self.keep_eyes_mouth)
                    for v in views]
        else:
            dsts = [geometry68.with_forehead(self._blend_shape(target_lm68, v.points[:68], opening)) for v in views]
        dst = dsts[0] if len(views) == 1 else sum(v.weight * d for v, d in zip(views, dsts, strict=True))
        scale = mr.face_scale(dst) if use_mesh else geometry68.face_scale(dst)
        parts = [self._paint(v, target, dst, target_mesh if use_mesh else None, size) for v in views]
        if len(views) == 1:
            result, region = parts[0]
        else:  # the cross-fade: the views' pixels and source regions, weighted
            result = sum(np.float32(v.weight) * p for v, (p, _) in zip(views, parts, strict=True))
            region = sum(np.float32(v.weight) * r for v, (_, r) in zip(views, parts, strict=True))
        keep = np.zeros((size, size), np.float32)
        if self.keep_eyes_mouth and use_mesh:
            keep = mesh_mouth_mask(target_mesh, size, scale, eyes=KEEP_EYES)
        elif self.keep_eyes_mouth:
            keep = _eyes_mouth_mask(target_lm68, size, scale, eyes=KEEP_EYES, opening=opening)
        return result, keep, np.clip(region, 0.0, 1.0).astype(np.float32)

    def _paint(self, view: SourceView, target: np.ndarray, dst: np.ndarray, target_mesh: np.ndarray | None,
               size: int) -> tuple[np.ndarray, np.ndarray]:
        """(the target crop with ``view``'s photo warped onto ``dst`` over the face, where the photo shows its own
        face): over the 468-point mesh when ``target_mesh`` is given, else over 68 points and the forehead."""
        src_img = view.crop
        if target_mesh is not None:
            tris = self._mesh_tris.get(id(src_img))
            if tris is None:
                tris = self._mesh_tris[id(src_img)] = mesh_warp.triangulate(view.mesh)
            order = mesh_warp.paint_order(view.mesh, dst, np.asarray(target_mesh)[:, 2], tris)
            map_x, map_y, inside = piecewise_affine_maps(view.mesh[:, :2], dst, tris[order], size)
        else:
            tris = self._tris.get(id(src_img))
            if tris is None:
                tris = self._tris[id(src_img)] = geometry68.triangulate(view.points)
            map_x, map_y, inside = piecewise_affine_maps(view.points, dst, tris, size)
        # Only the mesh's box is warped: outside the mesh the result is the target and the region 0.
        box = blur.weight_box(inside, 0)
        box_x, box_y, box_in = map_x[box], map_y[box], inside[box]
        # bicubic: the source's own detail is what the face keeps (a bilinear remap blurs it at every sub-pixel)
        ranges = self._ranges.get(id(src_img))
        if ranges is None:
            ranges = self._ranges[id(src_img)] = neighbour_range(src_img)
        warped = held_cubic(src_img, lambda x, interpolation: cv2.remap(x, box_x, box_y, interpolation,
                                                                        borderMode=cv2.BORDER_REPLICATE), ranges)
        result = target.astype(np.float32)  # a copy
        result[box] = np.where(box_in[..., None], warped, result[box])
        # The source photo's own face (not its fringe, backdrop or glasses), warped with the same maps.
        region = self._region.get(id(src_img))
        if region is None:
            region = self._region[id(src_img)] = source_region_mask(src_img, view.points[:68])
        warped_region = np.zeros((size, size), np.float32)
        warped_region[box] = cv2.remap(region, box_x, box_y, cv2.INTER_LINEAR,
                                       borderMode=cv2.BORDER_CONSTANT) * box_in
        region = warped_region
        if target_mesh is not None:  # where the photo or the plate sees the face edge-on, the plate's face stays
            shown = np.minimum(mesh_warp.visibility(view.mesh, tris), mesh_warp.visibility(target_mesh, tris))
            region = region * mesh_warp.visibility_map(dst, tris, order, shown, size, 0.02 * mr.face_scale(dst))
        return result, region

    def _blend_shape(self, target: np.ndarray, source: np.ndarray, opening: float) -> np.ndarray:
        """Target landmarks moved towards the source's face shape (aligned to the target by a similarity): the
        proportions of brows, nose, lips and jaw carry identity; pose and expression stay the target's."""
        m = similarity(source, target)
        aligned = transform_points(m, source)
        # The 2-D similarity is kept for turned faces too: a pose-true warp reads as the plate's face to a
        # recognizer (values: bench/QUALITY.md, 'Where the constants came from').
        alpha = np.full(68, self.shape_transfer)
        alpha[geometry68.JAW] *= 0.6  # the outline meets the plate: move it less
        # Brows keep the source's shape (held on the target's line they cost identity); the source's fringe above
        # them is left out by the source region (values: bench/QUALITY.md, 'Where the constants came from').
        if self.keep_eyes_mouth:  # the kept mouth (and kept eyes) must line up with the target's pixels
            alpha[geometry68.INNER_MOUTH] = 0.0
            alpha[geometry68.OUTER_MOUTH] *= 1.0 - opening  # an open mouth's lips are the plate's
            if KEEP_EYES:
                alpha[geometry68.LEFT_EYE + geometry68.RIGHT_EYE] = 0.0
            else:
                # The eyes take the source's corners (width, spacing, tilt: identity) with the target's opening
                # (blinks and squints) (values: bench/QUALITY.md, 'Where the constants came from').
                aligned = aligned.copy()
                for eye in (geometry68.LEFT_EYE, geometry68.RIGHT_EYE):
                    aligned[eye] = eye_with_opening(target[eye], aligned[eye])
        return target + alpha[:, None] * (aligned - target)


def piecewise_affine_maps(src: np.ndarray, dst: np.ndarray, tris: np.ndarray, size: int):
    """For each crop pixel inside the destination mesh: where to sample the source (backward mapping). Triangles
    are painted in the order given: where two overlap, the later one wins."""
    index = np.full((size, size), -1, np.int32)
    mats = np.zeros((len(tris), 2, 3), np.float64)
    tris = np.asarray(tris, np.intp).reshape(-1, 3)
    d_all = np.asarray(dst)[tris].astype(np.float32)  # (T, 3, 2)
    s_all = np.asarray(src)[tris].astype(np.float32)
    e = d_all[:, 1:] - d_all[:, :1]
    # degenerate in this pose (no area): its neighbours cover it
    flat = np.abs(e[:, 0, 0] * e[:, 1, 1] - e[:, 0, 1] * e[:, 1, 0]) < 1e-6
    corners = np.round(d_all).astype(np.int32)
    for t in np.flatnonzero(~flat).tolist():
        mats[t] = cv2.getAffineTransform(d_all[t], s_all[t])
        cv2.fillConvexPoly(index, corners[t], t)
    inside = index >= 0
    # Identity outside the mesh; the affine maps computed on the mesh's box only (the crop is mostly outside it).
    map_x = np.tile(np.arange(size, dtype=np.float32), (size, 1))
    map_y = np.ascontiguousarray(map_x.T)
    rows, cols = blur.weight_box(inside, 0)
    ys = np.arange(rows.start, rows.stop, dtype=np.float64)[:, None]
    xs = np.arange(cols.start, cols.stop, dtype=np.float64)[None, :]
    tri = np.maximum(index[rows, cols], 0)
    # each coefficient gathered on its own: a (H, W, 2, 3) gather of the matrices was most of this step's time
    a, b, c, d, e, f = (np.ascontiguousarray(mats[:, i, j])[tri] for i in range(2) for j in range(3))
    here = inside[rows, cols]
    map_x[rows, cols] = np.where(here, a * xs + b * ys + c, xs)
    map_y[rows, cols] = np.where(here, d * xs + e * ys + f, ys)
    return map_x, map_y, inside


def mouth_openness(lm68: np.ndarray) -> float:
    """0 for a closed mouth (gap OPEN_FROM of the eye distance) to 1 for one open by OPEN_FROM + OPEN_SPAN or more
    (inner-lip gap, the quality report's measure): how much of the plate's lips the swap keeps."""
    lm = np.asarray(lm68, np.float64)
    eyes = np.linalg.norm(lm[geometry68.LEFT_EYE].mean(0) - lm[geometry68.RIGHT_EYE].mean(0))
    gap = np.mean([np.linalg.norm(lm[a] - lm[b]) for a, b in ((61, 67), (62, 66), (63, 65))])
    return float(np.clip((gap / max(eyes, 1e-9) - OPEN_FROM) / OPEN_SPAN, 0.0, 1.0))


def _eyes_mouth_mask(lm68: np.ndarray, size: int, scale: float, eyes: bool = True,
                     opening: float | None = None) -> np.ndarray:
    """Soft mask of the target's inner mouth and, as far as the mouth is open (``mouth_openness``), its lips,
    grown so the lips' edges and the opening's dark corners are the plate's too (and eye openings): with the inner
    mouth alone an open mouth read less open than the plate's. A closed mouth keeps the source's lips: they carry
    identity. The inner mouth too is kept only as far as the mouth is open: a closed mouth's plate lip line over the
    source's lips read as a parted mouth (values: bench/QUALITY.md, 'Where the constants came from')."""
    inner = geometry68.feature_mask(lm68, size, [geometry68.INNER_MOUTH], 0.02 * scale)
    lips = geometry68.feature_mask(lm68, size, [geometry68.OUTER_MOUTH], LIPS_GROW * scale)
    mouth = (mouth_openness(lm68) if opening is None else opening) * np.maximum(inner, lips)
    mask = geometry68.feature_mask(lm68, size, [geometry68.LEFT_EYE, geometry68.RIGHT_EYE], 0.02 * scale) \
        if eyes else np.zeros_like(mouth)
    return _soft(np.maximum(mask, mouth), scale)


def _soft(mask: np.ndarray, scale: float) -> np.ndarray:
    """A kept-feature mask feathered at 0.015 of the face, its core held at 1."""
    sigma = max(0.015 * scale, 0.8)
    return np.clip(blur.on_support(mask, sigma, cheap=False) * 1.3, 0.0, 1.0)


def mesh_mouth_mask(mesh: np.ndarray, size: int, scale: float, eyes: bool = False) -> np.ndarray:
    """``_eyes_mouth_mask`` from the mesh's dense contours: the inner-lip ring's own polygon (the opening, not a
    hull of 8 points) and, as far as the mouth is open, the outer-lip ring's, grown the same way."""
    inner = mr.polygon_mask(mesh, [mr.LIPS_INNER], size, 0.02 * scale)
    mouth = np.maximum(inner, mr.mouth_openness(mesh) * mr.polygon_mask(mesh, [mr.LIPS_OUTER], size,
                                                                         MESH_LIPS_GROW * scale))
    if eyes:
        mouth = np.maximum(mouth, mr.polygon_mask(mesh, [mr.EYE_IMAGE_LEFT, mr.EYE_IMAGE_RIGHT], size, 0.02 * scale))
    return _soft(mouth, scale)
