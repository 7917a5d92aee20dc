"""What the ``blender`` executable does with a Flamenco worker's command line, for the bpy module, which has no
command line of its own (run with a Blender venv's Python: ``python blender_cli.py -b -y shot.blend --scene S ...``).

Blender handles its arguments in order, and so does this: ``-b``/``--background`` and ``-y``/``--enable-autoexec``
(the bpy module always runs in the background), a .blend path (opened), ``--scene NAME`` (the scene the later
arguments use), ``--python-exit-code N`` (a Python exception in a later ``--python-expr`` ends the process with N
instead of going on), ``--python-expr EXPR`` (run with ``sys.argv`` the whole command line, as Blender sets it),
``--render-frame A..B[,C]`` (each frame rendered as a render of its own, as Blender's ``-f`` does), and ``--``,
which ends Blender's arguments (the rest are for the scripts). Anything else is refused, so a job type that passes
an argument this does not model fails here rather than passing untested.

The Face Fusion extension installed by the tests is enabled first, as in the other fresh-process tests (4.2's bpy
module crashes in ``read_userpref``: there it is enabled directly).
"""

from __future__ import annotations

import importlib
import sys
import traceback

import bpy

addon_utils = importlib.import_module("addon_utils")  # Blender's own module: importable once bpy is

if bpy.app.version >= (5, 0, 0):
    bpy.ops.wm.read_userpref()
else:
    addon_utils.enable("bl_ext.user_default.face_fusion", default_set=True)


def render_frames(spec: str, scene: bpy.types.Scene) -> None:
    for part in spec.split(","):
        first, _, last = part.partition("..")
        for frame in range(int(first), int(last or first) + 1):
            start, end = scene.frame_start, scene.frame_end
            scene.frame_start = scene.frame_end = frame
            try:
                with bpy.context.temp_override(scene=scene):
                    bpy.ops.render.render(animation=True, scene=scene.name)
            finally:
                scene.frame_start, scene.frame_end = start, end


def main(argv: list[str]) -> int:
    sys.argv = ["blender", *argv]
    args = argv[:argv.index("--")] if "--" in argv else list(argv)
    exit_code, scene, i = 0, bpy.context.scene, 0
    while i < len(args):
        arg = args[i]
        if arg in ("-b", "--background", "-y", "--enable-autoexec"):
            i += 1
            continue
        if not arg.startswith("-"):
            bpy.ops.wm.open_mainfile(filepath=arg)
            scene, i = bpy.context.scene, i + 1
            continue
        value = args[i + 1]
        i += 2
        if arg == "--scene":
            scene = bpy.data.scenes[value]
        elif arg == "--python-exit-code":
            exit_code = int(value)
        elif arg == "--python-expr":
            try:
                with bpy.context.temp_override(scene=scene):
                    exec(compile(value, "<string>", "exec"), {"__name__": "__main__"})
            except Exception:
                traceback.print_exc()
                if exit_code:
                    return exit_code
        elif arg == "--render-frame":
            render_frames(value, scene)
        else:
            raise SystemExit(f"blender_cli.py: the argument {arg} is not modelled")
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.exit(code)
