"""Compositor: the Face Fusion group node reads the plate from its linked Image node and bakes the same way."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from conftest import engine_run, read_images, render_animation

bpy = pytest.importorskip("bpy")


def _compositor_scene(addon, scene, media):
    compat = addon.compat
    tree = compat.compositor_tree(scene, create=True)
    for n in list(tree.nodes):
        if n.bl_idname == "CompositorNodeRLayers":  # no 3D render: the plate is the only input
            tree.nodes.remove(n)
    image = bpy.data.images.load(media["plate"].replace("####", "0001"))
    image.source = "SEQUENCE"
    plate = tree.nodes.new("CompositorNodeImage")
    plate.image = image
    plate.frame_duration, plate.frame_start, plate.frame_offset = 5, 1, 0
    ff = addon.node.add_node(tree, plate)
    out = compat.compositor_output(tree)
    tree.links.new(ff.outputs["Image"], out.inputs[0])
    scene.render.use_compositing = True
    scene.render.use_sequencer = False
    return tree, ff


def test_node_group_structure(addon, scene, media, cache_dir):
    tree, ff = _compositor_scene(addon, scene, media)
    assert [s.name for s in ff.inputs] == ["Image"]
    assert [s.name for s in ff.outputs] == ["Image", "Face", "Matte"]
    assert ff.node_tree is not None and ff.node_tree.nodes.get(addon.node_target.FACE_NODE) is not None
    target = addon.lookup.target_of(ff)
    assert target.kind == "node" and target.scene == scene
    media_info = target.plate()
    assert media_info.path == media["plate"] and media_info.frames == [1, 2, 3, 4, 5]
    src = ff.face_fusion.sources.add()
    src.filepath = media["source"]
    face_image = ff.node_tree.nodes[addon.node_target.FACE_NODE].image
    assert ff.face_fusion.cache_key and ff.face_fusion.cache_key in face_image.filepath
    old = ff.face_fusion.cache_key
    ff.face_fusion.matte_feather = 0.1
    assert ff.face_fusion.cache_key != old
    copy = tree.nodes.new(addon.node_target.NODE_IDNAME)
    assert copy.node_tree != ff.node_tree  # each node has its own group (its own frames)


def test_node_bake_and_render_match_the_engine(addon, scene, media, cache_dir, tmp_path):
    tree, ff = _compositor_scene(addon, scene, media)
    src = ff.face_fusion.sources.add()
    src.filepath = media["source"]
    ff.face_fusion.watermark = False  # the mark carries a render id: two renders differ by it (up to 0.02)
    with bpy.context.temp_override(scene=scene):
        assert bpy.ops.facefusion.bake(node_name=ff.name) == {"FINISHED"}
    folder = bpy.path.abspath(ff.face_fusion.cache_dir)
    exrs = sorted(glob.glob(os.path.join(folder, "facefusion.*.exr")))
    assert len(exrs) == 5
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
        assert inside.sum() > 200
        assert np.abs(out - plate_px)[outside].max() < 0.01
        assert np.abs(out - plate_px)[inside].mean() > 0.02
        assert np.abs(out - engine).mean() < 0.005
        assert np.abs(out - engine)[inside].max() < 0.02
