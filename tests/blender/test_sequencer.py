"""Sequencer: add Face Fusion on a plate strip, bake through the real engine, render, compare pixels."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from conftest import add_plate, engine_run, read_images, render_animation

bpy = pytest.importorskip("bpy")


def _source(strip, media):
    src = strip.face_fusion.sources.add()
    src.kind = "FILE"
    src.filepath = media["source"]


def test_add_face_fusion_strip(addon, scene, media, cache_dir):
    plate = add_plate(scene, media, channel=2, frame_start=3)
    plate.select = True
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.add_strip() == {"FINISHED"}
    strip = scene.sequence_editor.active_strip
    ff = strip.face_fusion
    assert strip != plate and ff.plate_strip == plate.name
    assert strip.type == "IMAGE" and strip.channel == 3
    assert strip.blend_type == "ALPHA_OVER" and strip.alpha_mode == "PREMUL"
    assert strip.colorspace_settings.name == addon.compat.linear_colorspace_name()
    assert [e.filename for e in strip.elements] == [f"facefusion.{n:04d}.exr" for n in range(1, 6)]
    assert (strip.frame_start, strip.frame_final_start, strip.frame_final_end) == \
        (plate.frame_start, plate.frame_final_start, plate.frame_final_end)
    assert ff.cache_key and os.path.basename(ff.cache_dir.rstrip("/")) == ff.cache_key
    assert strip.directory == ff.cache_dir + ("" if addon.compat.READS_MATTE_LAYERS else "rgba/")
    assert os.path.commonpath([bpy.path.abspath(strip.directory), cache_dir]) == cache_dir


_ENABLE = {  # setting -> what makes it apply (settings without effect are not hashed: props.CONDITIONAL)
    "reference_frame": {"face_selector": "reference"}, "reference_face": {"face_selector": "reference"},
    "reference_distance": {"face_selector": "reference"}, "face_index": {"face_selector": "index"},
    "sr_denoise": {"super_resolution": True}, "colour_strength": {"colour_match": "gain_reinhard"},
    "enhancer_blend": {"face_enhancer": "gfpgan_1.4"}, "detector_upsample": {"detector": "dlib_hog"},
}


def test_any_setting_change_points_at_a_new_cache_folder(addon, scene, media, cache_dir):
    plate = add_plate(scene, media)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    _source(strip, media)
    first = strip.directory
    keys = {strip.face_fusion.cache_key}
    for s in addon.engine_link.settings_module().SCHEMA:
        ff = strip.face_fusion
        enabled = {}  # settings that only apply in some modes are changed in a mode where they apply
        for name, value in _ENABLE.get(s.name, {}).items():
            enabled[name] = getattr(ff, name)
            setattr(ff, name, value)
        keys.add(ff.cache_key)
        old = getattr(ff, s.name)
        if s.kind == "bool":
            setattr(ff, s.name, not old)
        elif s.kind == "enum":
            if len(s.choices) < 2:
                continue
            setattr(ff, s.name, next(c[0] for c in s.choices if c[0] != old))
        elif s.kind == "str":
            setattr(ff, s.name, "Linear Rec.709")
        else:
            setattr(ff, s.name, old + 1 if s.max is None or old + 1 <= s.max else (s.min or 0))
        assert ff.cache_key not in keys, f"changing {s.name} did not change the cache key"
        keys.add(ff.cache_key)
        assert ff.cache_key in strip.directory
        setattr(ff, s.name, old)
        for name, value in enabled.items():
            setattr(ff, name, value)
    assert strip.directory == first  # same settings, same folder: baked frames are found again


def _bake(strip):
    scene = strip.id_data
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}


def test_bake_and_render_match_the_engine(addon, scene, media, cache_dir, tmp_path):
    scene.sequencer_colorspace_settings.name = addon.compat.linear_colorspace_name()  # blend in linear light
    plate = add_plate(scene, media)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    _source(strip, media)
    strip.face_fusion.watermark = False  # the mark carries a render id: two renders differ by it (up to 0.02)
    _bake(strip)
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)  # the engine's files (with matte layers)
    exrs = sorted(glob.glob(os.path.join(folder, "facefusion.*.exr")))
    assert [os.path.basename(p) for p in exrs] == [f"facefusion.{n:04d}.exr" for n in range(1, 6)]
    mtimes = [os.stat(p).st_mtime_ns for p in exrs]
    _bake(strip)  # nothing changed: nothing is recomputed
    assert [os.stat(p).st_mtime_ns for p in exrs] == mtimes

    rendered = render_animation(scene)
    composite_dir = str(tmp_path / "engine_composite")
    engine_run("-m", "engine", "swap", "--source", media["source"], "--target", media["plate"],
               "--output", composite_dir, "--composite", "--no-watermark", "--quiet")
    plates = sorted(glob.glob(os.path.join(os.path.dirname(media["plate"]), "*.png")))
    composites = sorted(glob.glob(os.path.join(composite_dir, "*.exr")))
    images = read_images(rendered + plates + exrs + composites, str(tmp_path))
    n = len(rendered)
    for i in range(n):
        out, plate_px = images[i]["rgba"][..., :3], images[n + i]["rgba"][..., :3]
        alpha = images[2 * n + i]["rgba"][..., 3]
        engine = images[3 * n + i]["rgba"][..., :3]
        outside, inside = alpha == 0, alpha > 0.999
        assert inside.sum() > 200, "the engine found no face to replace"
        # Outside the face: the plate, untouched (only 8-bit decode differences between OCIO and the formula).
        assert np.abs(out - plate_px)[outside].max() < 0.01
        # Inside: the new face, as the engine composites it.
        assert np.abs(out - plate_px)[inside].mean() > 0.02
        assert np.abs(out - engine).mean() < 0.005
        assert np.abs(out - engine)[inside].max() < 0.02


def test_plate_offset_and_trim_line_up(addon, scene, media, cache_dir, tmp_path):
    scene.sequencer_colorspace_settings.name = addon.compat.linear_colorspace_name()
    scene.frame_start, scene.frame_end = 10, 12
    plate = add_plate(scene, media, frame_start=9)  # plate frame 1 on scene frame 9
    plate.frame_offset_start = 2  # trim: first visible plate frame is 3, on scene frame 11
    plate.frame_offset_end = 1  # last visible plate frame is 4, on scene frame 12
    strip = addon.sequencer.add_face_fusion(scene, plate)
    _source(strip, media)
    assert (strip.frame_final_start, strip.frame_final_end) == (plate.frame_final_start, plate.frame_final_end) == \
        (11, 13)
    _bake(strip)
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    baked = sorted(f for f in os.listdir(folder) if f.endswith(".exr"))
    assert baked == ["facefusion.0003.exr", "facefusion.0004.exr"]  # only the frames seen
    rendered = render_animation(scene)[1:]  # scene frames 11, 12
    plates = [media["plate"].replace("####", f"{n:04d}") for n in (3, 4)]
    exrs = [os.path.join(folder, f"facefusion.{n:04d}.exr") for n in (3, 4)]
    images = read_images(rendered + plates + exrs, str(tmp_path))
    for i in range(2):
        out, plate_px = images[i]["rgba"][..., :3], images[2 + i]["rgba"][..., :3]
        face = images[4 + i]["rgba"]
        expected = face[..., :3] + plate_px * (1.0 - face[..., 3:4])
        assert np.abs(out - expected).mean() < 0.003, f"scene frame {11 + i} is not plate frame {3 + i}"


def test_movie_plate(addon, scene, media, cache_dir):
    movie = addon.compat.top_strips(scene).new_movie("Movie", media["movie"], 1, 1)
    assert movie.frame_duration == media["frames"]
    strip = addon.sequencer.add_face_fusion(scene, movie)
    assert [e.filename for e in strip.elements] == [f"facefusion.{n:04d}.exr" for n in range(1, 6)]
    assert (strip.frame_final_start, strip.frame_final_end) == (movie.frame_final_start, movie.frame_final_end)
    _source(strip, media)
    scene.frame_end = 2
    _bake(strip)
    folder = bpy.path.abspath(strip.face_fusion.cache_dir)
    assert sorted(f for f in os.listdir(folder) if f.endswith(".exr")) == ["facefusion.0001.exr",
                                                                          "facefusion.0002.exr"]
