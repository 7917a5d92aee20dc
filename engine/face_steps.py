"""The per-chunk steps of a render, in the order they run: align -> swap -> refine -> mattes.

Fixed-size models get all faces of a chunk in one batched call (swapper, enhancer and matte models alike);
the geometric swapper (size 0) takes each face at its own size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from engine import track_models
from engine.io import colour
from engine.records import Crop, JobContext, PendingFrame, SwappedFace
from engine.stages import colour_match, geometry68, in_front, masks, mesh_warp, refine, registry
from engine.stages.align import crop_matrix, crop_size_for, transform_points, warp_crop
from engine.stages.contracts import Face, SwapInput
from engine.stages.occlusion_classic import CropLab, occlusion_matte


@dataclass
class Swapped:
    crops: list[np.ndarray]  # sRGB swapped crops, one per Crop
    model_masks: list[np.ndarray] | None  # the swapper's own masks, when it has them
    keeps: list[np.ndarray] | None  # where the target's own pixels come back after the lighting step
    regions: list[np.ndarray] | None = None  # where the swap shows the source photo's own face


def crop_geometry(ctx: JobContext, face: Face) -> tuple[int, np.ndarray]:
    size = ctx.swapper.size or crop_size_for(face.size)  # 0: the swapper takes any size
    return size, crop_matrix(face.kps5, ctx.swapper.template, size)


def _turn(ctx: JobContext, face: Face, frame: int) -> float:
    """The face's head turn, held along its track where the shot analysis gives one (track_models.add_turns)."""
    held = ctx.track_models.turn(face.track_id, frame)
    return geometry68.turn(face.landmarks68) if held is None else held


def align(ctx: JobContext, selected: dict[int, list[Face]], frames: list[int],
          decoded: dict[int, tuple[np.ndarray, str]] | None = None
          ) -> tuple[list[PendingFrame], list[Crop], list[int]]:
    """Read each frame (or take it from ``decoded``: a render decodes on one thread, in frame order) and cut its
    selected faces. Returns the frames, the crops and each crop's frame index."""
    pendings: list[PendingFrame] = []
    crops: list[Crop] = []
    owner: list[int] = []
    for f in frames:
        t0 = time.perf_counter()
        rgba, gamut = decoded[f] if decoded is not None else ctx.plate.read(f)
        plate_rgb = rgba[..., :3]  # a view: each crop copies only its box (align._in_box)
        warnings = [] if selected.get(f) else [f"no face to replace in frame {f}; wrote an empty matte"]
        for face in selected.get(f, []):
            if face.landmarks68 is None:
                continue
            size, m = crop_geometry(ctx, face)
            # Resample in linear light, then encode only the crop for the model (not the whole frame). The pixels
            # that go back into the frame are cut bicubic (align.sharp_warp); what the models and the skin and
            # occlusion models read keeps the bilinear cut they were measured on (a microphone's dark grille,
            # kept sharp, was a third less occluder: tests/test_composite_chain.py).
            target_lin = warp_crop(plate_rgb, m, size, sharp=True)
            crops.append(Crop(face, size, m, target_lin, colour.linear_to_model(warp_crop(plate_rgb, m, size), gamut),
                              transform_points(m, face.landmarks68),
                              ctx.texture.steps_for(face.size, _turn(ctx, face, f)) if ctx.texture else 0, f))
            owner.append(len(pendings))
        pendings.append(PendingFrame(f, rgba, gamut, t0, warnings))
    return pendings, crops, owner


def swap(ctx: JobContext, crops: list[Crop]) -> Swapped:
    def call(group: list[Crop]):
        batch = SwapInput(crops=np.stack([c.target for c in group]), landmarks=[c.lm for c in group],
                          matrices=np.stack([c.m for c in group]), face_sizes=np.array([c.face.size for c in group]),
                          meshes=[None if c.face.mesh468 is None else mesh_warp.to_crop(
                                      mesh_warp.follow_landmarks(c.face.mesh468, c.face.landmarks68), c.m)
                                  for c in group],
                          mouth_open=[ctx.track_models.mouth_open(c.face.track_id, c.frame) for c in group],
                          turns=[_turn(ctx, c.face, c.frame) for c in group])
        return ctx.swapper.swap(batch, ctx.identity)

    groups = [crops] if ctx.swapper.size else [[c] for c in crops]  # varying sizes: one call per face
    results = [call(g) for g in groups]
    swapped = [crop for r in results for crop in r.crops]
    model_masks = [mk for r in results for mk in r.masks] if all(r.masks is not None for r in results) else None
    keeps = [k for r in results for k in r.keep] if all(r.keep is not None for r in results) else None
    regions = [k for r in results for k in r.source_region] \
        if all(r.source_region is not None for r in results) else None
    return Swapped(swapped, model_masks, keeps, regions)


def refine_crops(ctx: JobContext, crops: list[Crop], swapped: list[np.ndarray]) -> list[np.ndarray]:
    if ctx.enhancer is None:
        return swapped
    return refine.enhance(ctx.enhancer, ctx.settings.enhancer_blend, [c.face.kps5 for c in crops],
                          [c.m for c in crops], swapped)


def mattes(ctx: JobContext, crops: list[Crop], swapped: Swapped, refined: list[np.ndarray],
           pendings: list[PendingFrame], owner: list[int]) -> None:
    """Each face's matte: the landmark matte narrowed (per-pixel minimum) by the swapper's own mask, the source
    region, the occlusion matte and every enabled matte layer, each kept as its own layer (``Skin``, where tone
    and light are measured, is written for grading but narrows nothing). Attaches the faces to their frames."""
    layer_mattes: dict[str, list[np.ndarray]] = {}
    for layer, backend in ctx.mattes:
        images = [c.target for c in crops] if layer.on == "target" else refined
        run = registry.layer_call(layer)
        layer_mattes[layer.name] = refine.batched(lambda b, run=run, backend=backend: run(backend, b), images)
    s = ctx.settings
    if "Occlusion" not in layer_mattes:  # no neural occluder: the classic one, from the track's own skin model
        layer_mattes["Occlusion"] = classic_occlusion(ctx, crops)
    # Nearer heads on the frame (replaced or not) are occluders too, and no measure of the plate's skin counts them.
    visible = [in_front.visible_matte(c.face, c.m, c.size, ctx.frame_faces.get(pendings[owner[i]].frame, []),
                                      track_models.plate_px(c.m)) for i, c in enumerate(crops)]
    layer_mattes["Occlusion"] = [occ if v is None else v if occ is None else np.minimum(np.asarray(occ, np.float32), v)
                                 for occ, v in zip(layer_mattes["Occlusion"], visible, strict=True)]
    for i, c in enumerate(crops):
        p = pendings[owner[i]]
        pts78 = geometry68.with_forehead(c.lm)
        landmark_matte = masks.face_matte(pts78, c.size, s.matte_erode, s.matte_feather)
        matte = landmark_matte  # narrowed below into new arrays: the landmark matte itself is measured on
        layers: dict[str, np.ndarray] = {}
        if swapped.model_masks is not None:  # the model's own mask narrows the matte and is kept as a layer
            layers["ModelMask"] = swapped.model_masks[i]
        if swapped.regions is not None:  # where the source photo shows no face of its own, the plate's stays
            layers["SourceRegion"] = masks.soften(swapped.regions[i], geometry68.face_scale(pts78), s.matte_feather)
        for name, per_crop in layer_mattes.items():
            if per_crop[i] is not None:
                layers[name] = np.asarray(per_crop[i], np.float32)
        for layer_matte in layers.values():
            matte = np.minimum(matte, layer_matte)
        # The layers' bilinear edges leave values far below a half float's precision; snapped to exactly 0
        # like the face matte's tail, so A = 0 and RGB = 0 agree in the EXR.
        matte = np.where(matte < 1.0 / 1024, 0.0, matte).astype(np.float32)
        swapped709 = colour.srgb_decode(refined[i])
        target709 = colour.to_rec709(c.target_lin, p.gamut)
        if swapped.regions is not None:  # the source's hair and backdrop never reach a later step: the plate there
            r = swapped.regions[i][..., None]
            swapped709 = swapped709 * r + target709 * (1.0 - r)
        clear = None if visible[i] is None else in_front.away_from(visible[i], c.face.size * track_models.plate_px(c.m))
        shown = layers.get("Occlusion")  # the face's tone is measured where no occluder covers it
        measures, skin, region = track_models.measure(target709, c.lm, c.size, c.m, s.matte_erode, s.matte_feather,
                                                      p.plate[..., :3], clear,
                                                      None if shown is None else shown >= 0.99, c.target_lin,
                                                      landmark_matte)
        layers["Skin"] = skin
        keep = swapped.keeps[i] if swapped.keeps is not None else None
        stats = colour_match.skin_stats(target709, skin) if s.colour_match != "none" else None
        p.faces.append(SwappedFace(c.face.track_id, c.m, swapped709, target709, matte, skin, stats, keep, layers,
                                   geometry68.face_scale(pts78), measures, region, c.lm,
                                   None if swapped.regions is None else swapped.regions[i]))
        p.super_resolved = p.super_resolved or c.sr_steps > 0


def classic_occlusion(ctx: JobContext, crops: list[Crop]) -> list[np.ndarray | None]:
    """The classic occlusion matte of each crop (1 visible face, 0 occluder) from its track's skin model, limited
    to the face outline like a neural occluder's: the layer reads as the visible face."""
    out: list[np.ndarray | None] = []
    for c in crops:
        measured = CropLab.of(c.target, c.lm)  # the fit and the occluder search read the same Lab
        model = ctx.track_models.skin_model(c.face.track_id, c.target, c.lm, measured)
        hull = geometry68.hull_mask(geometry68.with_forehead(c.lm), c.size)
        wears = ctx.track_models.wears_glasses(c.face.track_id)  # the track's decision: no frame drops the frame
        plate_px = track_models.plate_px(c.m)  # a glasses frame's lines are plate pixels wide
        out.append(None if model is None else occlusion_matte(c.target, c.lm, model, plate_px=plate_px,
                                                              wears=wears, measured=measured) * hull)
    return out
