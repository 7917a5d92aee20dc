"""Colour and composite steps: each face is matched to its track's skin statistics averaged over +-radius
frames (zero-lag smoothing), then pasted and composited. Render and preview share this window, so a preview
is the frame the bake writes."""

from __future__ import annotations

import numpy as np

from engine.face_steps import crop_geometry
from engine.io import colour
from engine.records import JobContext, PendingFrame
from engine.stages import colour_match, geometry68, masks
from engine.stages.align import transform_points, warp_crop
from engine.stages.composite import FrameLayers, composite, empty_layers, paste_face, paste_matte
from engine.stages.contracts import Face


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
        if self.ctx.settings.colour_match == "none" or self.fixed_stats or not self.selected.get(f):
            return
        rgba, gamut = self.ctx.plate.read(f)
        plate_rgb = np.ascontiguousarray(rgba[..., :3])
        for face in self.selected[f]:
            if face.landmarks68 is None:
                continue
            size, m = crop_geometry(self.ctx, face)
            lm = transform_points(m, face.landmarks68)
            skin = masks.skin_matte(geometry68.with_forehead(lm), lm, size)
            st = colour_match.skin_stats(colour.to_rec709(warp_crop(plate_rgb, m, size), gamut), skin)
            if st is not None:
                self.stats[(face.track_id, f)] = st

    def ready(self, p: PendingFrame, last_swapped: int) -> bool:
        """Every neighbour within the radius has been swapped (or is not rendered by this job)."""
        return p.frame + self.radius <= last_swapped

    def matched(self, p: PendingFrame) -> list[np.ndarray]:
        """Each face of ``p`` colour matched (linear Rec.709), the target's kept pixels put back."""
        s = self.ctx.settings
        out = []
        for fc in p.faces:
            lin709 = fc.swapped709
            window = [self.stats[(fc.track, g)] for g in range(p.frame - self.radius, p.frame + self.radius + 1)
                      if (fc.track, g) in self.stats]
            if not window and fc.stats is not None:
                window = [fc.stats]
            params = None
            if window and s.colour_strength > 0:
                params = colour_match.estimate_to(lin709, fc.skin, colour_match.SkinStats.mean(window),
                                                  s.colour_match)
            if params is not None:
                lin709 = colour_match.apply(lin709, params, s.colour_match, s.colour_strength)
            if fc.keep is not None:  # the target's own eyes and mouth, untouched by the colour match
                k = fc.keep[..., None]
                lin709 = lin709 * (1.0 - k) + fc.target709 * k
            out.append(lin709)
        return out


def composite_frame(ctx: JobContext, p: PendingFrame, matched: list[np.ndarray]) -> tuple[FrameLayers, np.ndarray]:
    """Paste each face over the layers (Face<n>.A each), gather the matte layers, and make the RGBA."""
    h, w = p.plate.shape[:2]
    layers = empty_layers(h, w)
    for i, (fc, lin709) in enumerate(zip(p.faces, matched, strict=True)):
        paste_face(layers, colour.from_rec709(lin709, p.gamut), fc.matte, fc.m, f"Face{i + 1}")
    extra: dict[str, np.ndarray] = {}
    for fc in p.faces:
        for name, crop_matte in fc.layers.items():
            paste_matte(extra, name, crop_matte, fc.m, (h, w))
    layers.mattes = {"FaceMatte": layers.matte.copy(), **layers.mattes, **extra}
    if ctx.settings.output_mode == "composite":
        return layers, composite(p.plate, layers)
    return layers, layers.face
