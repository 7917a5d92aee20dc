"""Face coverage: a bake records per frame how many faces were replaced and their lowest confidence, the panel
lists the frames without a face (and those of low confidence) as scene-frame ranges to jump to, the record
survives save and reload, and frames baked earlier are read back from their EXR headers."""

from __future__ import annotations

import json
import os

import pytest
from conftest import DrawnLayout, add_plate, blank_plate, exr_attributes

bpy = pytest.importorskip("bpy")

BLANK = 5  # the plate frame that shows no face (the last: a track bridges a short gap between two faces)
BRIDGED = 3  # a blank frame inside the track: bridged, so a face with a low confidence


def _blank_plate(media: dict, folder: str) -> dict:
    """The media's plate with frames BRIDGED and BLANK replaced by a flat grey image (nothing to find there)."""
    return blank_plate(media, folder, (BRIDGED, BLANK))


def _shot(addon, scene, media, frame_start=1):
    plate = add_plate(scene, media, frame_start=frame_start)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    strip.face_fusion.sources.add().filepath = media["source"]
    scene.frame_start, scene.frame_end = frame_start, frame_start + media["frames"] - 1
    return strip


def _bake(strip):
    with bpy.context.temp_override(scene=strip.id_data):
        assert bpy.ops.facefusion.bake(strip_name=strip.name) == {"FINISHED"}


def test_bake_records_faces_per_frame_and_the_panel_lists_the_frame_without_a_face(addon, scene, media, cache_dir,
                                                                                   tmp_path):
    shot = _blank_plate(media, str(tmp_path / "plate"))
    strip = _shot(addon, scene, shot, frame_start=3)  # plate frames 1..5 on scene frames 3..7
    ff = strip.face_fusion
    _bake(strip)
    record = addon.coverage.parse(ff.coverage)
    assert record.key == ff.cache_key
    assert sorted(record.frames) == [1, 2, 3, 4, 5]
    faces = {f: n for f, (n, _) in record.frames.items()}
    assert faces[BLANK] == 0 and all(faces[f] >= 1 for f in (1, 2, 3, 4)), record.frames
    lowest = {f: c for f, (_, c) in record.frames.items()}
    assert lowest[BLANK] is None and all(0.0 <= lowest[f] <= 1.0 for f in (1, 2, 3, 4)), record.frames
    assert lowest[BRIDGED] < 0.5 <= min(lowest[f] for f in (1, 2, 4)), record.frames  # the bridged face is unsure

    # The record is what the frames' EXRs say (read by OpenImageIO), and the add-on's header reader agrees.
    folder = bpy.path.abspath(ff.cache_dir)
    for f, a in exr_attributes(folder, [1, 2, 3, 4, 5]).items():
        confidence = json.loads(a["facefusion:confidence"])
        assert int(a["facefusion:faces"]) == len(confidence) == faces[f]
        assert lowest[f] == (pytest.approx(min(confidence), abs=1e-4) if confidence else None)
        header = addon.exr_header.read_string_attributes(os.path.join(folder, f"facefusion.{f:04d}.exr"))
        assert header.pop("capDate") and header == a  # (OpenImageIO calls capDate DateTime)

    # The panel (plate frames 1..5 on scene frames 3..7): a summary, the frame without a face and the one below the
    # threshold as buttons that jump there.
    drawn: list = []
    target = addon.lookup.target_of(strip)
    addon.panels.draw_coverage(DrawnLayout(drawn), target)
    labels = [d[1] for d in drawn if d[0] == "label"]
    assert "Faces on 4/5 frames; 1 without a face; 1 below 0.50" in labels, labels
    jumps = [(d[2], d[3].frame, d[3].strip_name) for d in drawn if d[:2] == ("operator", "facefusion.jump_to_frame")]
    assert jumps == [("7", 7, strip.name), ("5", 5, strip.name)]
    assert labels.index("No face:") < labels.index("Low confidence:")
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.jump_to_frame(strip_name=strip.name, frame=7) == {"FINISHED"}
    assert scene.frame_current == 7

    # The threshold is the panel's, not a swap setting: no re-key, and the bridged frame is no longer listed.
    ff.coverage_threshold = 0.2
    assert ff.cache_key == record.key
    summary = addon.coverage.summarise(record, target.timeline_frames(target.plate()), ff.coverage_threshold)
    assert (summary.no_face, summary.low, summary.shown, summary.unknown) == ([(7, 7)], [], 5, 0)


def test_coverage_survives_save_and_reload(addon, scene, media, cache_dir, tmp_path):
    strip = _shot(addon, scene, media)
    _bake(strip)
    text = strip.face_fusion.coverage
    assert addon.coverage.parse(text).key == strip.face_fusion.cache_key
    path = str(tmp_path / "coverage.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path, copy=True)
    with bpy.data.libraries.load(path) as (_, data_to):  # the saved scene, read back beside this session's data
        data_to.scenes = [scene.name]
    loaded = data_to.scenes[0]
    try:
        assert loaded != scene
        assert addon.compat.strips(loaded)[strip.name].face_fusion.coverage == text
    finally:
        bpy.data.scenes.remove(loaded)


def test_frames_baked_earlier_are_read_from_their_files(addon, scene, media, cache_dir):
    strip = _shot(addon, scene, media)
    ff = strip.face_fusion
    _bake(strip)
    baked = addon.coverage.parse(ff.coverage)
    ff.coverage = ""  # as a .blend from before coverage, or frames rendered on a farm
    drawn: list = []
    addon.panels.draw_coverage(DrawnLayout(drawn), addon.lookup.target_of(strip))
    assert ("label", "Not measured for these settings: bake, or read the baked frames") in drawn
    assert any(d[0] == "operator" and d[1] == "facefusion.read_coverage" for d in drawn)
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.read_coverage(strip_name=strip.name) == {"FINISHED"}
    assert addon.coverage.parse(ff.coverage) == baked
    ff.coverage = ""
    _bake(strip)  # nothing to make: the bake reads the coverage of the frames it found on disk
    assert addon.coverage.parse(ff.coverage) == baked


def test_exr_header_reader_refuses_what_is_not_a_whole_exr(addon, tmp_path):
    png = tmp_path / "x.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    with pytest.raises(addon.exr_header.ExrHeaderError, match="x.png is not an OpenEXR file"):
        addon.exr_header.read_string_attributes(str(png))
    cut = tmp_path / "cut.exr"
    cut.write_bytes(addon.exr_header.MAGIC + b"\x02\0\0\0" + b"facefusion:faces\0string\0" + b"\x05\0\0\0" + b"1")
    with pytest.raises(addon.exr_header.ExrHeaderError, match="cut short"):
        addon.exr_header.read_string_attributes(str(cut))
    assert addon.coverage.from_file(str(cut)) is None  # a frame still being written counts as not measured


def test_a_damaged_record_reads_as_not_measured_and_ranges_join_consecutive_frames(addon):
    cov = addon.coverage
    assert cov.parse("{not json") == cov.Coverage() and cov.parse('{"frames": [[1, "x", null]]}') == cov.Coverage()
    assert cov.ranges([7, 1, 2, 3, 9, 8, 12]) == [(1, 3), (7, 9), (12, 12)]
    record = cov.Coverage("k", {1: (1, 0.9), 2: (0, None), 3: (2, 0.3), 4: (1, None)})
    assert cov.parse(record.to_json()) == record
    summary = cov.summarise(record, {10: 1, 11: 2, 12: 3, 13: 4, 14: 5}, 0.5)
    assert (summary.no_face, summary.low, summary.shown, summary.unknown) == ([(11, 11)], [(12, 12)], 4, 1)
    assert summary.line(0.5) == "Faces on 3/4 frames; 1 without a face; 1 below 0.50; 1 not measured"
