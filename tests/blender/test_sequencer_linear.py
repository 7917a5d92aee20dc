"""The Sequencer shows exactly the engine's composite (issue 36 item 4): with the Sequencer blending in linear light
(*Blend in Linear Light*, the setting the panel offers when it does not), Alpha Over of the Face Fusion strip on the
plate equals the engine's linear composite within 1/255 at every pixel, the matte's soft edge included, with the
view transform at Standard."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from conftest import DrawnLayout, add_plate, engine_run, read_images, render_animation

bpy = pytest.importorskip("bpy")


def _srgb(linear: np.ndarray) -> np.ndarray:
    """What Standard shows, in code values 0..255 (the piecewise sRGB curve)."""
    x = np.clip(linear, 0.0, 1.0)
    return 255.0 * np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(x, 1 / 2.4) - 0.055)


def _panel(addon, strip) -> DrawnLayout:
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    return layout


def test_sequencer_render_equals_the_engine_composite_at_every_pixel(addon, scene, media, cache_dir, tmp_path):
    scene.sequencer_colorspace_settings.name = "sRGB"  # Blender's default: Alpha Over in display space
    plate = add_plate(scene, media)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    strip.face_fusion.sources.add().filepath = media["source"]
    strip.face_fusion.watermark = False  # the mark carries a render id: two renders differ by it
    scene.frame_end = 2
    layout = _panel(addon, strip)
    offered = [d for d in layout.drawn if d[:2] == ("operator", "facefusion.sequencer_linear")]
    assert offered, layout.drawn  # the panel names the setting and offers it
    assert scene.sequencer_colorspace_settings.name == "sRGB"  # nothing changed behind the artist's back
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.sequencer_linear() == {"FINISHED"}  # the button
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}
    assert scene.sequencer_colorspace_settings.name == addon.compat.linear_colorspace_name()
    assert not [d for d in _panel(addon, strip).drawn if d[:2] == ("operator", "facefusion.sequencer_linear")]

    rendered = render_animation(scene)
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    exrs = sorted(glob.glob(os.path.join(folder, "facefusion.*.exr")))[:2]
    composite_dir = str(tmp_path / "engine_composite")
    engine_run("-m", "engine", "swap", "--source", media["source"], "--target", media["plate"], "--frames", "1-2",
               "--output", composite_dir, "--composite", "--no-watermark", "--quiet")
    composites = sorted(glob.glob(os.path.join(composite_dir, "*.exr")))
    assert len(rendered) == len(exrs) == len(composites) == 2
    images = read_images(rendered + exrs + composites, str(tmp_path))
    for i in range(2):
        out, alpha, engine = images[i]["rgba"][..., :3], images[2 + i]["rgba"][..., 3], images[4 + i]["rgba"][..., :3]
        edge = (alpha > 0.01) & (alpha < 0.99)
        assert edge.sum() > 50, "the matte has no soft edge to check"
        diff = np.abs(_srgb(out) - _srgb(engine))
        assert diff.max() <= 1.0, (diff.max(), diff[edge].max(), diff[alpha == 0].max())
