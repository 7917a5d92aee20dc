"""Nothing an artist makes is lost across .blend files (issue 36): two .blend files in one folder share
'//face_fusion_cache/', and *Remove Unused* in one of them lists, then removes, only the folders no .blend uses.
Run in a fresh Blender, as an artist's session: it saves and opens files, which the other tests must not see."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ADDON, SESSION_SHOT

bpy = pytest.importorskip("bpy")
ARGS = {"addon": ADDON, "shot": SESSION_SHOT}

PRELUDE = """
import json, os, sys, bpy, addon_utils
from types import SimpleNamespace
addon_utils.enable("%(addon)s", default_set=True)
ff_addon = sys.modules["%(addon)s.addon"]
prefs = bpy.context.preferences.addons["%(addon)s"].preferences
prefs.cache_dir = "//face_fusion_cache"  # the default: every .blend of a folder shares it
plate_file, source, project = sys.argv[1:4]

%(shot)s


def strip():
    return [s for s in ff_addon.compat.strips(bpy.context.scene) if s.face_fusion.plate_strip][0]


def bake(feather):
    s = strip()
    s.face_fusion.matte_feather = feather
    assert bpy.ops.facefusion.bake(strip_name=s.name) == {"FINISHED"}
    return os.path.basename(bpy.path.abspath(s.face_fusion.cache_dir).rstrip("/"))
"""

REMOVE_UNUSED = PRELUDE + """
new_shot(ff_addon, plate_file, source, 2)
a = bake(0.11)
bpy.ops.wm.save_as_mainfile(filepath=os.path.join(project, "shot.blend"))
bpy.ops.wm.save_as_mainfile(filepath=os.path.join(project, "other.blend"))  # a second shot in the same folder
b = bake(0.12)
bpy.ops.wm.save_mainfile()
bpy.ops.wm.open_mainfile(filepath=os.path.join(project, "shot.blend"))
c = bake(0.13)  # a look tried and abandoned in shot.blend: nothing uses c after the save
assert bake(0.11) == a
bpy.ops.wm.save_mainfile()
root = os.path.join(project, "face_fusion_cache")
unknown = os.path.join(root, "0123456789abcdef")  # made by an older version (no manifest): somebody's, stays
os.makedirs(unknown)
open(os.path.join(unknown, "facefusion.0001.exr"), "wb").close()
cls = ff_addon.op_cache.FACEFUSION_OT_clean_cache
dialogs, reports = [], []
wm = SimpleNamespace(face_fusion_runtime=bpy.context.window_manager.face_fusion_runtime,
                     invoke_props_dialog=lambda op, width=300: dialogs.append(op) or {"RUNNING_MODAL"})
ctx = SimpleNamespace(window_manager=wm)
op = SimpleNamespace(report=lambda kind, msg: reports.append(msg), _listed=None)
invoked = cls.invoke(op, ctx, SimpleNamespace(type="LEFTMOUSE"))  # the panel's button: a dialog, nothing removed yet
labels = []
op.layout = SimpleNamespace(column=lambda: SimpleNamespace(label=lambda text="", icon="": labels.append(text)))
cls.draw(op, ctx)
before_ok = sorted(os.listdir(root))
executed = cls.execute(op, ctx)  # OK
after_ok = sorted(os.listdir(root))
users = {k: ff_addon.cache_users.read(os.path.join(root, k)) for k in (a, b)}
bpy.ops.wm.open_mainfile(filepath=os.path.join(project, "other.blend"))
s = strip()
other_missing = ff_addon.lookup.target_of(s).missing([1, 2])
print("RESULT " + json.dumps({"a": a, "b": b, "c": c, "invoked": sorted(invoked), "dialogs": len(dialogs),
                              "labels": labels, "before_ok": before_ok, "after_ok": after_ok,
                              "executed": sorted(executed), "reports": reports, "users": users,
                              "other_missing": other_missing}))
"""


def _session(script: str, media: dict, tmp_path) -> dict:
    project = str(tmp_path / "project")
    os.makedirs(project)
    proc = subprocess.run([sys.executable, "-c", script % ARGS, media["plate"].replace("####", "0001"),
                           media["source"], project], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


def test_remove_unused_keeps_the_frames_of_another_blend(installed, media, tmp_path):
    r = _session(REMOVE_UNUSED, media, tmp_path)
    a, b, c = r["a"], r["b"], r["c"]
    assert len({a, b, c}) == 3
    # the button first lists what it will remove, with sizes: c only (b is other.blend's, the unknown one nobody's
    # known), and removes nothing before OK
    assert r["invoked"] == ["RUNNING_MODAL"] and r["dialogs"] == 1
    assert r["labels"][0].startswith("Remove 1 folder(s), ") and len(r["labels"]) == 2, r["labels"]
    assert r["labels"][1].startswith(f"{c}: ") and r["labels"][1].endswith(("KB", "MB")), r["labels"]
    assert c in r["before_ok"]
    assert r["executed"] == ["FINISHED"] and r["after_ok"] == sorted([a, b, "0123456789abcdef"]), r
    assert r["reports"][-1].startswith("Face Fusion: removed 1 unused folder(s)"), r["reports"]
    assert [os.path.basename(u) for u in r["users"][a]] == ["shot.blend"]
    assert [os.path.basename(u) for u in r["users"][b]] == ["other.blend"]
    assert r["other_missing"] == []  # other.blend opens with its frames
