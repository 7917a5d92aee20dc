"""Does Blender read an EXR with a data window smaller than its display window to the same pixels as the
full-window file? A study script for issue 32 point 4 (not a pytest test: run it with a bpy venv).

    .venv/bin/python bench/exr_window.py variants FRAME.exr VARIANTS      # the files (engine Python)
    .venv-bpy-5.0/bin/python tests/blender/data_window_probe.py VARIANTS OUT
    .venv/bin/python bench/exr_window.py compare OUT/<a> OUT/<b> ...     # compare the renders (engine Python)

For every VARIANTS/<case>_{full,win}.exr it records (a) ``bpy.data.images.load``: size, type, channels and
the pixels (compared full vs win here, saved to OUT/load.npz), and renders at the plate's size, 32-bit EXR:
(b) the Sequencer: the file as an image strip alone, and Alpha Over (premultiplied) on VARIANTS/plate.exr,
(c) the Compositor: Image node straight to the output, Alpha Over on the plate (as addon/node_target.py does),
and for multilayer files the FaceMatte pass. Renders go to OUT/<how>_<case>_<full|win>.exr; OUT/report.txt
sums up.
"""

from __future__ import annotations

import glob
import os
import sys

import bpy
import numpy as np

V5 = bpy.app.version >= (5, 0, 0)
LOG: list[str] = []


def log(msg: str) -> None:
    print(msg, flush=True)
    LOG.append(msg)


def linear_name() -> str:
    prop = bpy.types.ColorManagedInputColorspaceSettings.bl_rna.properties["name"]
    names = {item.identifier for item in prop.enum_items}
    return next((n for n in ("Linear Rec.709", "Linear") if n in names), "Linear Rec.709")


def new_scene(name: str, w: int, h: int, out: str) -> bpy.types.Scene:
    sc = bpy.data.scenes.new(name)
    sc.render.engine = "BLENDER_WORKBENCH"
    sc.render.resolution_x, sc.render.resolution_y = w, h
    sc.render.resolution_percentage = 100
    sc.frame_start = sc.frame_end = sc.frame_current = 1
    sc.render.image_settings.file_format = "OPEN_EXR"
    sc.render.image_settings.color_mode = "RGBA"
    sc.render.image_settings.color_depth = "32"
    sc.render.film_transparent = True
    sc.render.dither_intensity = 0.0
    sc.view_settings.view_transform = "Standard"
    sc.view_settings.look = "None"
    sc.render.filepath = out
    return sc


def render(sc: bpy.types.Scene, path: str) -> str:
    sc.render.filepath = path
    with bpy.context.temp_override(scene=sc):
        bpy.ops.render.render(write_still=True, scene=sc.name)
    if not os.path.isfile(path):
        log(f"  !! no render written: {path}")
    return path


def load_image(path: str) -> bpy.types.Image:
    img = bpy.data.images.load(path, check_existing=False)
    img.colorspace_settings.name = linear_name()
    img.alpha_mode = "PREMUL"
    return img


def strips_of(sc: bpy.types.Scene):
    ed = sc.sequence_editor or sc.sequence_editor_create()
    return ed.strips if hasattr(ed, "strips") else ed.sequences


def sequencer(path: str, plate: str | None, w: int, h: int, out: str) -> str:
    sc = new_scene("seq", w, h, out)
    sc.render.use_sequencer = True
    sc.render.use_compositing = False
    coll = strips_of(sc)
    if plate:
        p = coll.new_image("plate", plate, 1, 1)
        p.colorspace_settings.name = linear_name()
    s = coll.new_image("face", path, 2, 1)
    s.colorspace_settings.name = linear_name()
    s.alpha_mode = "PREMUL"
    s.blend_type = "ALPHA_OVER"
    try:
        render(sc, out)
    finally:
        bpy.data.scenes.remove(sc)
    return out


def compositor(path: str, plate: str | None, socket: str | None, w: int, h: int, out: str) -> str:
    sc = new_scene("comp", w, h, out)
    sc.render.use_sequencer = False
    sc.render.use_compositing = True
    if V5:
        tree = bpy.data.node_groups.new("comp", "CompositorNodeTree")
        sc.compositing_node_group = tree
        tree.interface.new_socket("Image", in_out="OUTPUT", socket_type="NodeSocketColor")
        dst = tree.nodes.new("NodeGroupOutput").inputs[0]
    else:
        sc.use_nodes = True
        tree = sc.node_tree
        for n in list(tree.nodes):
            tree.nodes.remove(n)
        comp = tree.nodes.new("CompositorNodeComposite")
        comp.use_alpha = True
        dst = comp.inputs[0]
    face = tree.nodes.new("CompositorNodeImage")
    face.image = load_image(path)
    outs = {s.name: s for s in face.outputs if s.enabled}
    if socket is not None:
        if socket not in outs:
            log(f"  {os.path.basename(out)}: no '{socket}' output (outputs {list(outs)})")
            bpy.data.scenes.remove(sc)
            return ""
        src = outs[socket]
    else:
        src = outs.get("Combined") or outs.get("Image") or face.outputs[0]
    if plate:
        pl = tree.nodes.new("CompositorNodeImage")
        pl.image = load_image(plate)
        over = tree.nodes.new("CompositorNodeAlphaOver")
        if hasattr(over, "use_premultiply"):
            over.use_premultiply = False
        bg, fg = ((over.inputs["Background"], over.inputs["Foreground"]) if "Background" in over.inputs
                  else (over.inputs[1], over.inputs[2]))
        tree.links.new(pl.outputs[0], bg)
        tree.links.new(src, fg)
        src = over.outputs[0]
    tree.links.new(src, dst)
    try:
        render(sc, out)
    finally:
        bpy.data.scenes.remove(sc)
    return out


def image_info(path: str) -> tuple[str, np.ndarray | None]:
    img = load_image(path)
    w, h = img.size
    n = len(img.pixels)
    px = None
    if n:
        px = np.empty(n, np.float32)
        img.pixels.foreach_get(px)
        px = px.reshape(h, w, -1)
    info = (f"size={w}x{h} type={img.type} channels={img.channels} float={img.is_float} "
            f"has_data={img.has_data} pixels={n}")
    bpy.data.images.remove(img)
    return info, px


def main(argv: list[str]) -> int:
    src, out = argv[0], argv[1]
    os.makedirs(out, exist_ok=True)
    plate = os.path.join(src, "plate.exr")
    pimg = bpy.data.images.load(plate)
    w, h = pimg.size
    bpy.data.images.remove(pimg)
    log(f"Blender {bpy.app.version_string}; plate {w}x{h}")
    arrays = {}
    cases = sorted({os.path.basename(p)[: -len("_full.exr")] for p in glob.glob(os.path.join(src, "*_full.exr"))})
    for case in cases:
        pair = {k: os.path.join(src, f"{case}_{k}.exr") for k in ("full", "win")}
        pxs = {}
        for k, path in pair.items():
            info, px = image_info(path)
            pxs[k] = px
            log(f"load {case}_{k}: {info}")
            if px is not None:
                arrays[f"{case}_{k}"] = px
        a, b = pxs["full"], pxs["win"]
        if a is None or b is None:
            log(f"load {case}: full {'no' if a is None else 'has'} pixels, win {'no' if b is None else 'has'} pixels")
        elif a.shape != b.shape:
            log(f"load {case}: DIFF shape {a.shape} vs {b.shape}")
        else:
            log(f"load {case}: {'SAME' if np.array_equal(a, b) else 'DIFF'} max|d|={np.abs(a - b).max():.3g}")
        for k, path in pair.items():
            tag = f"{case}_{k}.exr"
            sequencer(path, None, w, h, os.path.join(out, f"seq_{tag}"))
            sequencer(path, plate, w, h, os.path.join(out, f"seqover_{tag}"))
            compositor(path, None, None, w, h, os.path.join(out, f"comp_{tag}"))
            compositor(path, plate, None, w, h, os.path.join(out, f"compover_{tag}"))
            if "rgba" not in case:
                compositor(path, None, "FaceMatte", w, h, os.path.join(out, f"compmatte_{tag}"))
    np.savez_compressed(os.path.join(out, "load.npz"), **arrays)
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]))
