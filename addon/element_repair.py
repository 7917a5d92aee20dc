"""Image strips whose frame sizes were saved uninitialised: found and repaired, by the add-on and by any Blender.

Add-on versions up to issue 12 grew a Face Fusion strip's list of frames with ``elements.append``, which leaves each
new element's ``orig_width``/``orig_height`` uninitialised (read-only in RNA). Blender renders a frame whose file is
missing with a placeholder of that size, so such a .blend crashes Blender ("Calloc returns null", exit 139) on every
frame that is not baked yet. The add-on repairs its strips when a file loads (``file_handlers``), but a render node
without the extension opens the file as it was saved.

So this file is both a module of the add-on and a Blender script that needs nothing but Blender (no add-on, no
engine, no relative import), for a render job to run on any worker before it renders, and for re-saving old files:

    blender -b shot.blend --python <Face Fusion folder>/addon/element_repair.py -a          # repaired for this render
    blender -b shot.blend --python <Face Fusion folder>/addon/element_repair.py -- --save   # the file itself repaired

It gives every image strip with an impossible size (whatever made it: the sizes are only what Blender remembers of
the files, read again when a file loads) a fresh list of the same files, the way Blender's Change Path operator
does, with its timing kept; prints one line per strip; and with ``--save`` saves the file (Blender keeps the old one
as ``.blend1``). A strip it cannot repair would crash the render: the script then exits 1, naming it.

Without the extension nothing bakes a missing Face Fusion frame, and Blender would render the plate alone there. So
when the extension is not enabled and the command line renders (``-f``/``--render-frame``, ``-a``/``--render-anim``),
the script exits 1 naming the Face Fusion strips' frames of that render that have no file, rather than let the job
deliver them without the face.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import bpy

MAX_SIZE = 1 << 16  # larger than any image Blender loads: an element size above it is uninitialised memory
TIMING = ("frame_offset_start", "frame_offset_end", "animation_offset_start", "animation_offset_end")
PREFIX = "Face Fusion repair:"
FRAME_FILE = re.compile(r"facefusion\.\d+\.exr")  # engine/outputs.py output_name()


class RepairError(RuntimeError):
    """Blender did not take a strip's new list of frames; the message names the strip."""


def bad_sizes(strip: Any) -> int:
    """How many elements carry a size Blender's own strip creators never leave: they leave 0 until the file is loaded,
    then the file's size. Anything else is memory ``elements.append`` left uninitialised."""
    count = 0
    for e in strip.elements:
        w, h = e.orig_width, e.orig_height
        if (w, h) != (0, 0) and not (0 < w <= MAX_SIZE and 0 < h <= MAX_SIZE):
            count += 1
    return count


def elements_sound(strip: Any) -> bool:
    return bad_sizes(strip) == 0


def set_elements(strip: Any, directory: str, names: list[str]) -> None:
    """Give the strip exactly ``names`` as its files, every element size 0 until loaded.

    ``elements.append`` grows the list with realloc and leaves the new sizes unset (bpy 4.2 and 5.0), so the list is
    replaced the way Blender's Change Path operator does it: one zeroed allocation. The operator acts on the editor's
    active strip; that is restored. Main thread only (writes bpy data)."""
    scene = strip.id_data
    ed = scene.sequence_editor
    active = ed.active_strip
    timing = {a: getattr(strip, a) for a in TIMING if hasattr(strip, a)}  # the operator locks the old handles
    ed.active_strip = strip
    try:
        with bpy.context.temp_override(scene=scene, sequencer_scene=scene):
            result = bpy.ops.sequencer.change_path(directory=bpy.path.abspath(directory) or "/", relative_path=False,
                                                   files=[{"name": n} for n in names], use_placeholders=False)
    finally:
        ed.active_strip = active
    strip.directory = directory  # as given ('//'-relative stays relative; the operator stores it absolute)
    for attr, value in timing.items():
        setattr(strip, attr, value)
    if result != {"FINISHED"} or [e.filename for e in strip.elements] != names:
        raise RepairError(f"strip '{strip.name}': Blender did not take its list of frames")


def image_strips(scene: Any) -> list[Any]:
    """Every image strip of the scene, inside meta strips too (4.4+ ``strips_all``, before ``sequences_all``)."""
    ed = scene.sequence_editor
    if ed is None:
        return []
    coll = ed.strips_all if hasattr(ed, "strips_all") else ed.sequences_all
    return [s for s in coll if s.type == "IMAGE"]


def repair(scenes: Any = None) -> list[str]:
    """Repair every Face Fusion strip with impossible sizes; a line per strip repaired. Raises RepairError. Other
    image strips are the artist's (or another add-on's): never changed, never named."""
    done = []
    for scene in bpy.data.scenes if scenes is None else scenes:
        for strip in image_strips(scene):
            if not is_face_fusion(strip):
                continue
            bad = bad_sizes(strip)
            if not bad:
                continue
            set_elements(strip, strip.directory, [e.filename for e in strip.elements])
            done.append(f"scene '{scene.name}', strip '{strip.name}': {bad} of {len(strip.elements)} frame sizes "
                        "were uninitialised (saved by an older Face Fusion); reset")
    return done


def _frames(argv: list[str], scene: Any) -> set[int]:
    """Scene frames this command line renders (Blender handles its arguments in order; ``--`` ends them)."""
    args = argv[:argv.index("--")] if "--" in argv else argv
    start, end, frames = scene.frame_start, scene.frame_end, set()
    for i, arg in enumerate(args[:-1]):
        value = args[i + 1]
        if arg in ("-s", "--frame-start") and value.lstrip("-").isdigit():
            start = int(value)
        elif arg in ("-e", "--frame-end") and value.lstrip("-").isdigit():
            end = int(value)
        elif arg in ("-f", "--render-frame"):
            for part in value.split(","):
                a, _, b = part.partition("..")
                try:
                    frames.update(range(int(a or start), int(b or a or end) + 1))
                except ValueError:  # relative frames (+N, -N): the whole scene range is checked
                    frames.update(range(start, end + 1))
    anim = any(a in ("-a", "--render-anim") for a in args)
    return frames | (set(range(start, end + 1)) if anim else set())


def _ranges(frames: list[int]) -> str:
    out: list[list[int]] = []
    for f in sorted(frames):
        if out and f == out[-1][1] + 1:
            out[-1][1] = f
        else:
            out.append([f, f])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def is_face_fusion(strip: Any) -> bool:
    """A Face Fusion strip, told by its files (the engine's names, engine/outputs.py): without the extension its
    settings cannot be read (Blender 5.0 keeps add-on properties apart from custom properties)."""
    return bool(strip.elements) and all(FRAME_FILE.fullmatch(e.filename) for e in strip.elements)


def unbaked(scene: Any, frames: set[int]) -> list[str]:
    """Face Fusion strips with frames of ``frames`` whose file does not exist: a line per strip."""
    lines = []
    for strip in image_strips(scene):
        if strip.mute or not is_face_fusion(strip):
            continue
        folder = bpy.path.abspath(strip.directory)
        first = int(round(strip.frame_start)) - int(getattr(strip, "animation_offset_start", 0))
        names = [e.filename for e in strip.elements]
        missing = [f for f in frames if strip.frame_final_start <= f < strip.frame_final_end
                   and 0 <= f - first < len(names) and not os.path.isfile(os.path.join(folder, names[f - first]))]
        if missing:
            lines.append(f"scene '{scene.name}', Face Fusion strip '{strip.name}': frame(s) {_ranges(missing)} "
                         f"not baked (no file in {folder})")
    return lines


def _scene(argv: list[str]) -> Any:
    for flag in ("-S", "--scene"):
        if flag in argv[:-1] and argv[argv.index(flag) + 1] in bpy.data.scenes:
            return bpy.data.scenes[argv[argv.index(flag) + 1]]
    return bpy.context.scene


def main(argv: list[str]) -> int:
    """The script: repair the open .blend in memory (``--save`` after ``--``: and save it). Exit status."""
    save = "--save" in (argv[argv.index("--") + 1:] if "--" in argv else [])
    try:
        lines = repair()
    except RepairError as exc:
        print(f"{PREFIX} ERROR: {exc}; rendering it would crash Blender: open the file with the Face Fusion "
              "extension enabled and save it", file=sys.stderr)
        return 1
    for line in lines:
        print(f"{PREFIX} {line}")
    if not lines:
        print(f"{PREFIX} every image strip of {bpy.data.filepath or 'the file'} is sound")
    elif save:
        if not bpy.data.filepath:
            print(f"{PREFIX} ERROR: --save needs a saved .blend (blender -b shot.blend --python ...)", file=sys.stderr)
            return 2
        if bpy.ops.wm.save_mainfile() != {"FINISHED"}:
            print(f"{PREFIX} ERROR: could not save {bpy.data.filepath}", file=sys.stderr)
            return 1
        print(f"{PREFIX} saved {bpy.data.filepath}")
    strip_type = getattr(bpy.types, "Strip", None) or bpy.types.Sequence  # 4.4 renamed Sequence
    scene = _scene(argv)
    if scene is not None and "face_fusion" not in strip_type.bl_rna.properties.keys():  # the extension is not here
        missing = unbaked(scene, _frames(argv, scene))
        if missing:
            for line in missing:
                print(f"{PREFIX} ERROR: {line}", file=sys.stderr)
            print(f"{PREFIX} ERROR: the Face Fusion extension is not enabled in this Blender, so nothing would bake "
                  "these frames and they would render without the face: bake them first, or enable the extension "
                  "on this worker", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":  # blender -b shot.blend --python element_repair.py ...
    status = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    if status:
        # Not sys.exit: Blender 4.2 does not survive finalising from inside its command-line handling (addon/at_exit).
        os._exit(status)
