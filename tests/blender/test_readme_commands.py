"""The README's commands that build and install the extension, executed as written (the build's output folder and
the user folder go to temporary ones). ``blender --command extension ...`` runs Blender's own command handler
(``bl_pkg.cli_extension``, what the blender binary dispatches to) in the ``bpy`` module."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
from conftest import ADDON, ROOT

bpy = pytest.importorskip("bpy")

BLENDER_COMMAND = ("import sys, bpy, bl_pkg; rc = bl_pkg.cli_extension(sys.argv[1:]); "
                   "print('ENABLED' if '%s' in bpy.context.preferences.addons else 'NOT ENABLED'); sys.exit(rc)")


def readme_commands() -> list[list[str]]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text[text.index("\n## Blender\n"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's Blender section has no ```sh block"
    return [shlex.split(line) for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_readme_build_and_install_commands(tmp_path):
    commands = readme_commands()
    assert len(commands) == 3 and commands[0] == ["mkdir", "-p", "dist"], commands  # Blender's builder needs it
    out, user = str(tmp_path / "dist"), str(tmp_path / "user")

    def local(arg: str) -> str:  # the README's dist/ folder, here a temporary one
        return out + arg[len("dist"):] if arg == "dist" or arg.startswith("dist/") else arg

    env = {**os.environ, "BLENDER_USER_RESOURCES": user}
    os.makedirs(out)
    for cmd in commands[1:]:
        if cmd[0].endswith("/bin/python"):
            run = [sys.executable, *map(local, cmd[1:])]
        else:
            assert cmd[:3] == ["blender", "--command", "extension"], cmd
            run = [sys.executable, "-c", BLENDER_COMMAND % ADDON, *map(local, cmd[3:])]
        proc = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    zips = os.listdir(out)
    assert len(zips) == 1 and zips[0].startswith("face_fusion-")
    assert "ENABLED" in proc.stdout.split()
    installed = os.path.join(user, "extensions", "user_default", "face_fusion")
    assert os.path.isfile(os.path.join(installed, "blender_manifest.toml"))
    assert os.path.isfile(os.path.join(installed, "engine", "__main__.py"))  # what Set up Engine needs came along


def test_build_accepts_the_folder_as_its_argument(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "packaging", "build_extension.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1].startswith(str(tmp_path))
