"""The source face check: picking a source photo asks the engine what a bake would find in it (a face, how many,
which one is used), and the panel shows the answer; a changed photo is checked again; Check Faces asks on demand.
The real engine, the real operators (with a window open: the artist's path), the panel drawn into a recording
layout."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from conftest import DrawnLayout, add_plate

bpy = pytest.importorskip("bpy")


def _save(path: str, rgba: np.ndarray) -> str:
    """Write float RGBA (rows bottom-up, as Blender stores them) to a PNG through Blender."""
    h, w = rgba.shape[:2]
    image = bpy.data.images.new(os.path.basename(path), w, h, alpha=True)
    image.pixels.foreach_set(np.ascontiguousarray(rgba, np.float32).ravel())
    image.filepath_raw, image.file_format = path, "PNG"
    image.save()
    bpy.data.images.remove(image)
    return path


def _photos(media: dict, folder: str) -> dict[str, str]:
    """A wall (no face), a pair (the portrait at half size on the left, whole on the right) and the portrait."""
    portrait = bpy.data.images.load(media["source"])
    w, h = portrait.size
    px = np.empty(w * h * 4, np.float32)
    portrait.pixels.foreach_get(px)
    bpy.data.images.remove(portrait)
    px = px.reshape(h, w, 4)
    half = px[::2, ::2]
    pair = np.ones((h, half.shape[1] + w, 4), np.float32)
    pair[: half.shape[0], : half.shape[1]] = half  # (rows run bottom-up: the small face sits low on the left)
    pair[:, half.shape[1]:] = px
    return {"wall": _save(os.path.join(folder, "wall.png"), np.full((192, 192, 4), 0.4, np.float32)),
            "pair": _save(os.path.join(folder, "pair.png"), pair),
            "portrait": shutil.copy(media["source"], os.path.join(folder, "portrait.png"))}  # checked nowhere else


def _face_lines(addon, strip) -> list[tuple[str, str]]:
    layout = DrawnLayout([])
    addon.panels.draw_settings(layout, bpy.context, strip)
    names = [os.path.basename(s.filepath) for s in strip.face_fusion.sources]
    return [(text, icon) for text, icon in layout.icons if any(text.startswith(f"{n}: ") for n in names)]


def test_picking_a_photo_shows_what_the_engine_finds_in_it(addon, scene, media, cache_dir, tmp_path, monkeypatch):
    photos = _photos(media, str(tmp_path))
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    asked: list[int] = []
    real = addon.session.Session.source_faces
    monkeypatch.setattr(addon.session.Session, "source_faces",  # a spy: the real request runs
                        lambda self, photos, *a, **k: asked.append(len(photos)) or real(self, photos, *a, **k))
    monkeypatch.setattr(addon.op_consent, "interactive", lambda context: True)  # a window is open: the artist picks
    with bpy.context.temp_override(scene=scene):
        for name in ("portrait", "pair", "wall"):
            assert bpy.ops.facefusion.source_add(strip_name=strip.name, filepath=photos[name]) == {"FINISHED"}
    assert asked == [1, 1, 1]  # each photo once, when it was picked
    sources = strip.face_fusion.sources
    assert [s.filepath for s in sources] == [photos["portrait"], photos["pair"], photos["wall"]]  # all kept
    assert _face_lines(addon, strip) == [
        ("portrait.png: 1 face found; it is used", "CHECKMARK"),
        ("pair.png: 2 faces found; the largest (2nd from the left) is used", "INFO"),
        ("wall.png: No face found: use a photo where the face is frontal, unobstructed and at least 80 pixels wide",
         "ERROR")]
    # another photo in an entry: its check no longer applies until the engine is asked again
    sources[2].filepath = photos["portrait"]
    assert _face_lines(addon, strip)[2] == ("portrait.png: faces not checked yet", "QUESTION")
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.check_source_faces(strip_name=strip.name) == {"FINISHED"}
    assert asked == [1, 1, 1]  # that photo's answer was known: the engine is not asked twice for one content
    assert _face_lines(addon, strip)[2] == ("portrait.png: 1 face found; it is used", "CHECKMARK")


def test_check_faces_without_a_photo_says_what_to_do(addon, scene, media, cache_dir):
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    with bpy.context.temp_override(scene=scene):
        with pytest.raises(RuntimeError, match="no source photo to check; add the photo of the new face first"):
            bpy.ops.facefusion.check_source_faces(strip_name=strip.name)
