"""Colour, light and composite steps. Each face takes its track's plate statistics averaged over +-radius frames
(zero-lag smoothing): the optional global colour match, then the lighting step (the plate's light and colour,
level and colour pooled), detail match (the plate's sharpness and grain, pooled), the target's kept eyes and
mouth, and the seamless blend at the matte's edge; then it is pasted and composited. The same chain runs for
every swapper. Render and preview share this window, so a preview is the frame the bake writes."""

from __future__ import annotations

import numpy as np

from engine import track_models
from engine.face_steps import crop_geometry
from engine.io import colour
from engine.records import JobContext, PendingFrame, SwappedFace
from engine.stages import (
    blend,
    colour_match,
    detail_match,
    expression_lines,
    face_symmetry,
    geometry68,
    level_cap,
    lighting,
    masks,
    plate_texture,
    resolution,
)
from engine.stages.align import transform_points, warp_crop
from engine.stages.composite import FrameLayers, composite, empty_layers, paste_face, paste_matte
from engine.stages.contracts import Face
from engine.stages.plate_texture import PlateTexture

# Frames either side whose plate skin tone the face's level is pooled over: 0, frame by frame, so the level follows
# the plate's own changes without lag. A face whose skin shows fewer than LEVEL_OWN_PX plate pixels is too small to
# measure alone: it keeps the pooled level (values: bench/QUALITY.md, 'Where the constants came from').
LEVEL_RADIUS = 0
LEVEL_OWN_PX = 400


def level_radius(tone: lighting.SkinTone, m: np.ndarray, pooled: int) -> int:
    """Frames either side the face's level is smoothed over: LEVEL_RADIUS when its skin (``tone.pixels``, crop
    pixels of the frame -> crop matrix ``m``) shows at least LEVEL_OWN_PX plate pixels, else ``pooled``."""
    return LEVEL_RADIUS if tone.pixels / track_models.plate_px(m) ** 2 >= LEVEL_OWN_PX else pooled


class ColourWindow:
    def __init__(self, ctx: JobContext, selected: dict[int, list[Face]],
                 stats: dict[tuple[int, int], colour_match.SkinStats] | None = None) -> None:
        self.ctx = ctx
        self.selected = selected
        self.radius = ctx.radius
        self.stats: dict[tuple[int, int], colour_match.SkinStats] = {}  # (track, frame) -> plate skin stats
        # given: the shot analysis's skin statistics (engine.analysis.stats), the same whatever a job renders
        self.fixed_stats = stats is not None
        if stats is not None:
            self.stats = dict(stats)

    def add(self, p: PendingFrame) -> None:
        for fc in p.faces:
            if fc.stats is not None and not self.fixed_stats:
                self.stats[(fc.track, p.frame)] = fc.stats

    def add_neighbours(self, rendered: list[int]) -> None:
        """Statistics of the frames around ``rendered`` that this job does not render: the colour match of a
        frame averages its neighbours' whether or not this job renders them, so pixels never depend on the
        frame range a job was given."""
        todo = set(rendered)
        near = {g for f in rendered for g in range(f - self.radius, f + self.radius + 1)}
        for g in sorted((near & set(self.selected)) - todo):
            self.ctx.check_cancel()
            self._add_plate_frame(g)

    def _add_plate_frame(self, f: int) -> None:
        s = self.ctx.settings
        if not self.selected.get(f) or s.colour_match == "none" or self.fixed_stats:
            return
        rgba, gamut = self.ctx.plate.read(f)
        plate_rgb = np.ascontiguousarray(rgba[..., :3])
        for face in self.selected[f]:
            if face.landmarks68 is None:
                continue
            size, m = crop_geometry(self.ctx, face)
            lm = transform_points(m, face.landmarks68)
            target709 = colour.to_rec709(warp_crop(plate_rgb, m, size), gamut)
            skin = masks.skin_matte(geometry68.with_forehead(lm), lm, size)
            st = colour_match.skin_stats(target709, skin)
            if st is not None:
                self.stats[(face.track_id, f)] = st

    def ready(self, p: PendingFrame, last_swapped: int) -> bool:
        """Every neighbour within the radius has been swapped (or is not rendered by this job)."""
        return p.frame + self.radius <= last_swapped

    def _window(self, table: dict, track: int, frame: int) -> list:
        return [table[(track, g)] for g in range(frame - self.radius, frame + self.radius + 1) if (track, g) in table]

    def matched(self, p: PendingFrame) -> list[np.ndarray]:
        """Each face of ``p`` through the chain (linear Rec.709): the crop to paste under its matte."""
        return [self._finish(fc, p.frame) for fc in p.faces]

    def _finish(self, fc: SwappedFace, frame: int) -> np.ndarray:
        s = self.ctx.settings
        lin709 = fc.swapped709
        window = self._window(self.stats, fc.track, frame) or ([fc.stats] if fc.stats is not None else [])
        if window and s.colour_match != "none" and s.colour_strength > 0:
            params = colour_match.estimate_to(lin709, fc.skin, colour_match.SkinStats.mean(window), s.colour_match)
            if params is not None:
                lin709 = colour_match.apply(lin709, params, s.colour_match, s.colour_strength)
        # This frame's own tone and detail (engine.track_models: where pooled ones will come from).
        measures = [fc.measures] if fc.measures is not None else []
        tones = [m.tone for m in measures if m.tone is not None]
        if tones:
            radius = level_radius(tones[0], fc.m, self.radius)
            tones = [self.ctx.track_models.smoothed_tone(tones[0], fc.track, frame, radius)]
        details = [m.detail for m in measures if m.detail is not None]
        # The target's skin where nothing covers it; the swap's skin where it shows the source's own face.
        occlusion = fc.layers.get("Occlusion")
        skin_t = fc.skin * occlusion if occlusion is not None else fc.skin
        region = fc.layers.get("SourceRegion")
        skin_s = fc.skin * (region > 0.5) if region is not None else fc.skin
        enough = skin_s.sum() >= lighting.MIN_SKIN_PX and (skin_t.sum() >= lighting.MIN_SKIN_PX or tones)
        if s.lighting_strength > 0 and enough:  # else: a face too small or hidden to measure keeps its own light
            # Inside the shape zone the swap keeps its own mid-frequency shading (identity); elsewhere the plate's.
            size = lin709.shape[0]
            zone = None if fc.lm68 is None else lighting.shape_zone(fc.lm68, size, fc.face_scale)
            before = lin709
            cut = plate_texture.band_sigma(fc.face_scale, track_models.plate_px(fc.m))
            lin709 = lighting.relight(lin709, fc.target709, skin_t, fc.face_scale, skin_swapped=skin_s,
                                      strength=s.lighting_strength, scale=s.lighting_scale,
                                      tone=lighting.SkinTone.pooled(tones) if tones else None, zone=zone,
                                      mirror=fc.lm68, facing=0.0 if fc.lm68 is None else face_symmetry.facing(fc.lm68),
                                      colour_keep=None if fc.lm68 is None else face_symmetry.eye_openings(
                                          fc.lm68, size, fc.face_scale),
                                      lines=None if fc.lm68 is None or s.expression_lines == "swap" else
                                      expression_lines.lines_zone(fc.lm68, size, fc.face_scale),
                                      line_cut=cut, plate_lines=s.expression_lines != "none",
                                      line_reach=expression_lines.crease_reach(fc.face_scale, cut)
                                      if s.expression_lines == "creases" else None)
            lin709 = level_cap.cap_to_plate(lin709, fc.target709, fc.skin)
            if fc.shown is not None:
                lin709 = unmix(lin709, before, fc.target709, fc.shown)
        if s.detail_match and details and fc.region is not None:
            # Measured where the pooled plate figures were (outside the source region the swap holds the plate).
            lin709 = detail_match.match_detail(
                lin709, fc.target709, fc.region, fc.face_scale,
                plate_px=track_models.plate_px(fc.m), add_grain=s.grain_match, seed=frame,
                pooled=detail_match.PlateDetail.pooled(details), texture_skin=fc.skin,
                features=None if fc.lm68 is None else resolution.eyes_and_brows(fc.lm68, lin709.shape[0],
                                                                                  fc.face_scale))
        if region is not None:
            # Where the swap shows the plate (the source's hair or backdrop was there), the plate's own pixels:
            # the gain there was measured for the source's skin and turned the plate's forehead pale blue-grey.
            r = region[..., None]
            lin709 = lin709 * r + fc.target709 * (1.0 - r)
        if fc.keep is not None:  # the target's own eyes and mouth, after light and detail (they are the plate's)
            k = fc.keep[..., None]
            lin709 = lin709 * (1.0 - k) + fc.target709 * k
        if s.blend_mode != "none":
            band = s.blend_band * fc.face_scale if s.blend_mode == "poisson" else None
            # the plate detail handed over at the edge went through the crop's cut and will go through the paste
            # back: raised by what those keep of the finest band (a photo's 1100 px face keeps half of it)
            loss = detail_match.PlateDetail.pooled(details).loss if details else 1.0
            lin709 = blend.blend(lin709, fc.target709, fc.matte, s.blend_mode, band=band,
                                 fine_gain=1.0 / np.sqrt(loss), fine_sigma=1.5 * track_models.plate_px(fc.m),
                                 plate_px=track_models.plate_px(fc.m),
                                 carry=None if fc.lm68 is None else blend.plate_features_out(
                                     fc.lm68, lin709.shape[0], fc.face_scale))
        return lin709.astype(np.float32)


def composite_frame(ctx: JobContext, p: PendingFrame, matched: list[np.ndarray]) -> tuple[FrameLayers, np.ndarray]:
    """Paste each face over the layers (Face<n>.A each), gather the matte layers, and make the RGBA."""
    h, w = p.plate.shape[:2]
    layers = empty_layers(h, w)
    for i, (fc, lin709) in enumerate(zip(p.faces, matched, strict=True)):
        texture = None
        if ctx.settings.plate_texture and fc.lm68 is not None:
            texture = PlateTexture.of(fc.lm68, lin709.shape[0], fc.face_scale, track_models.plate_px(fc.m),
                                      fc.layers.get("Occlusion"))
        paste_face(layers, colour.from_rec709(lin709, p.gamut), fc.matte, fc.m, f"Face{i + 1}", texture, p.plate)
    extra: dict[str, np.ndarray] = {}
    for fc in p.faces:
        for name, crop_matte in fc.layers.items():
            paste_matte(extra, name, crop_matte, fc.m, (h, w))
    layers.mattes = {"FaceMatte": layers.matte.copy(), **layers.mattes, **extra}
    if ctx.settings.output_mode == "composite":
        rgba = composite(p.plate, layers)
        ctx.plate.nonfinite.restore(p.frame, rgba, layers.matte)  # the plate's own NaN/inf, outside the matte
        return layers, rgba
    ctx.plate.nonfinite.restore(p.frame, None, None)
    return layers, layers.face


def unmix(relit: np.ndarray, swapped: np.ndarray, target: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """The relit crop where the swap showed a mix of the source's face (share ``shown``) and the plate (the rest,
    at the source region's edge): only the source's share takes the lighting step's change, the plate's stays the
    plate. The gain at the region's edge is the source's (a frontal photo's shaded cheek side was lifted 5-7x onto
    a turned boy's near cheek): on the plate's pixels there it printed a white crescent."""
    r = np.clip(shown, 0.0, 1.0)[..., None]
    plate = target * (1.0 - r)
    source = np.maximum(swapped - plate, 0.0)
    change = relit / np.maximum(swapped, 1e-6)
    return np.where(r > 0.999, relit, source * change + plate).astype(np.float32)
