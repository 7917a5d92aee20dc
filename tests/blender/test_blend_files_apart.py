"""Nothing an artist makes is lost across .blend files (issue 36): two .blend files in one folder share
'//face_fusion_cache/', and *Remove Unused* in one of them lists, then removes, only the folders no .blend uses.
Run in a fresh Blender, as an artist's session: it saves and opens files, which the other tests must not see."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ADDON, SESSION_SHOT, engine_run

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


def _session(script: str, media: dict, tmp_path, *args: str) -> dict:
    project = str(tmp_path / "project")
    os.makedirs(project)
    proc = subprocess.run([sys.executable, "-c", script % ARGS, media["plate"].replace("####", "0001"),
                           media["source"], project, *args], capture_output=True, text=True, timeout=600,
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


CLOSE_DURING_BAKE = PRELUDE + """
import time
scene, s = new_shot(ff_addon, plate_file, source, 30)
bpy.ops.wm.save_as_mainfile(filepath=os.path.join(project, "shot.blend"))  # its frames stay after it is closed
cls = ff_addon.op_bake.FACEFUSION_OT_bake


class Op:  # the Bake operator as Blender runs it modally in a window: invoke's run, then TIMER events
    modal, _tick, _finish = cls.modal, cls._tick, cls._finish
    _finish_closed, _reported, _end_ui = cls._finish_closed, cls._reported, cls._end_ui

    def __init__(self):
        self.reports, self._timer = [], object()

    def report(self, kind, msg):
        self.reports.append(msg)


class WM:
    face_fusion_runtime = property(lambda self: bpy.context.window_manager.face_fusion_runtime)
    event_timer_remove = progress_update = progress_end = staticmethod(lambda *a: None)


ctx = SimpleNamespace(window_manager=WM(), workspace=None)
op = Op()
item = ff_addon.bake.plan(ff_addon.lookup.target_of(s))
op._run = ff_addon.open_runs.track(ff_addon.bake.start([item], ff_addon.op_bake.frame_landed))  # as invoke
ctx.window_manager.face_fusion_runtime.running = True
timer = SimpleNamespace(type="TIMER")
deadline = time.monotonic() + 300
messages, fractions = [], []
while not item.done and time.monotonic() < deadline:
    assert op.modal(ctx, timer) == {"RUNNING_MODAL"}
    messages.append(ctx.window_manager.face_fusion_runtime.message)
    fractions.append(ctx.window_manager.face_fusion_runtime.progress)
    time.sleep(0.1)
folder = item.folder
frames = lambda: {f: os.stat(os.path.join(folder, f)).st_mtime_ns for f in os.listdir(folder) if f.endswith(".exr")}
landed = frames()
run = op._run
if sys.argv[4] == "new":
    bpy.ops.wm.read_homefile(use_empty=True)  # File > New while the bake runs
else:
    addon_utils.disable("%(addon)s", default_set=False)  # what quitting Blender does first
at_close = frames()
time.sleep(5)
later = frames()
if sys.argv[4] == "new":
    polled = sorted(op.modal(ctx, timer))  # a TIMER event still reaching the operator after the load
    runtime = bpy.context.window_manager.face_fusion_runtime
    message, running = runtime.message, runtime.running
else:
    polled, message, running = ["CANCELLED"], "", False
print("RESULT " + json.dumps({"landed": len(landed), "at_close": at_close, "later": later, "polled": polled,
                              "reports": op.reports, "message": message, "running": running,
                              "closed": run.closed, "finished": run.finished,
                              "active": ff_addon.open_runs.active(), "messages": messages,
                              "analysis": item.analysis, "fractions": fractions}))
"""


@pytest.fixture(scope="module")
def media_30(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = str(tmp_path_factory.mktemp("media_30"))
    return json.loads(engine_run(os.path.join(os.path.dirname(__file__), "make_media.py"), out, "--frames", "30",
                                 "--size", "160"))


@pytest.mark.parametrize("close", ["new", "quit"])
def test_file_new_during_a_bake_stops_it(installed, media_30, tmp_path, close):
    """File > New (load_pre) or quitting (Blender first disables the add-on) during a bake: the engine's job is
    cancelled and confirmed stopped before the file closes, no frame lands in the closed shot's cache afterwards, and a
    TIMER still reaching the operator ends it silently (no report about the cancelled job, no bogus 'frame N is
    missing'). Before the first frame of a fresh shot, the bake's progress line shows the shot analysis's progress."""
    r = _session(CLOSE_DURING_BAKE, media_30, tmp_path, close)
    assert r["landed"] >= 1 and len(r["at_close"]) < 30, r  # the bake was under way when the file was closed
    assert r["later"] == r["at_close"], r  # nothing landed (or was rewritten) afterwards
    assert r["closed"] and r["finished"] and r["active"] == 0
    assert r["polled"] == ["CANCELLED"] and r["reports"] == [], r
    assert r["message"] == "" and not r["running"]
    if close != "new":  # the shot was analysed by the first run
        return
    # before the first frame, the panel's progress line said how far the shot analysis got (a fresh plate), in
    # frames of the shot with the pass's name; the bar's fraction never went backwards, analysis to frames
    an = r["analysis"]
    assert (an["pass"], an["passes"], an["pass_done"], an["frames"]) == (3, 3, 30, 30), an
    analysing = [m for m in r["messages"] if m.startswith("Face Fusion: analysing the shot: ")]
    assert analysing, r["messages"]
    for m in analysing:
        assert re.fullmatch(r"Face Fusion: analysing the shot: (finding shot cuts|finding faces|measuring faces), "
                            r"frame ([0-9]+) of 30 \(pass [123] of 3\)", m), m
    assert r["fractions"] == sorted(r["fractions"]) and 0 < r["fractions"][-1] < 1, r["fractions"]


UNSAVED = PRELUDE + """
mode = sys.argv[4]
scene, s = new_shot(ff_addon, plate_file, source, 2)
assert bpy.ops.facefusion.bake(strip_name=s.name) == {"FINISHED"}
folder = bpy.path.abspath(s.face_fusion.cache_dir)
listing = lambda: sorted(f for f in os.listdir(folder) if f.endswith(".exr")) if os.path.isdir(folder) else []
print("FOLDER " + json.dumps({"folder": folder, "files": listing(),
                              "session": ff_addon.unsaved_dirs.session_dir()}), flush=True)
if mode == "wait":  # stays open, unsaved, while another Blender bakes the same settings and saves
    sys.stdin.readline()
elif mode == "save":
    bpy.ops.wm.save_as_mainfile(filepath=os.path.join(project, "shot.blend"))
    assert ff_addon.cache_move.wait_all() == []
    folder = bpy.path.abspath(s.face_fusion.cache_dir)
elif mode == "crash":
    os.kill(os.getpid(), 9)
print("RESULT " + json.dumps({"folder": folder, "files": listing()}), flush=True)
"""


def _blender(mode: str, media: dict, tmp_path, project: str, **kw) -> subprocess.Popen:
    os.makedirs(project, exist_ok=True)
    return subprocess.Popen([sys.executable, "-c", UNSAVED % ARGS, media["plate"].replace("####", "0001"),
                             media["source"], project, mode], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp_path / "tmp")}, **kw)


def _line(out: str, tag: str) -> dict:
    line = next((x for x in out.splitlines() if x.startswith(tag + " ")), None)
    assert line, out[-2000:]
    return json.loads(line[len(tag) + 1:])


def test_unsaved_files_bake_into_folders_of_their_own(installed, media, tmp_path):
    """Two unsaved files with the same settings in two Blender processes bake into two folders; the first save of one
    moves only its own frames; quitting unsaved removes that session's frames; a killed Blender's folder is removed by
    the next Blender to start, once nobody holds its lock."""
    (tmp_path / "tmp").mkdir()
    waiting = _blender("wait", media, tmp_path, str(tmp_path / "a"), stdin=subprocess.PIPE)
    seen = []
    while not seen or not seen[-1].startswith("FOLDER ") and seen[-1]:
        seen.append(waiting.stdout.readline())
    first = _line("".join(seen), "FOLDER")  # baked, unsaved, still open
    saver = _blender("save", media, tmp_path, str(tmp_path / "b"))
    out, err = saver.communicate(timeout=600)
    assert saver.returncode == 0, out[-2000:] + err[-3000:]
    second, saved = _line(out, "FOLDER"), _line(out, "RESULT")
    assert first["files"] == second["files"] == ["facefusion.0001.exr", "facefusion.0002.exr"]
    assert first["folder"] != second["folder"]  # same settings, same key: still two folders
    assert os.path.basename(first["folder"].rstrip("/")) == os.path.basename(second["folder"].rstrip("/"))
    assert saved["folder"].startswith(str(tmp_path / "b")) and saved["files"] == second["files"]
    out, err = waiting.communicate("\n", timeout=600)  # the first file kept its frames through the other's save
    assert waiting.returncode == 0, out[-2000:] + err[-3000:]
    assert _line(out, "RESULT")["files"] == first["files"]
    assert not os.path.exists(first["session"]) and not os.path.exists(first["session"] + ".lock")  # quit unsaved

    crashed = _blender("crash", media, tmp_path, str(tmp_path / "c"))
    out, err = crashed.communicate(timeout=600)
    assert crashed.returncode == -9, out[-2000:] + err[-3000:]
    gone = _line(out, "FOLDER")
    assert gone["files"] and os.path.isdir(gone["folder"])  # a killed Blender cleans nothing up
    starter = _blender("start", media, tmp_path, str(tmp_path / "d"))
    out, err = starter.communicate(timeout=600)
    assert starter.returncode == 0, out[-2000:] + err[-3000:]
    assert not os.path.exists(gone["session"]) and not os.path.exists(gone["session"] + ".lock")
    assert not os.path.exists(_line(out, "FOLDER")["session"])  # and the last one quit unsaved


REOPEN = PRELUDE + """
scene, s = new_shot(ff_addon, plate_file, source, 2)
folder = os.path.dirname(plate_file)
names = sorted(f for f in os.listdir(folder) if f.endswith(".png"))
plain = ff_addon.compat.top_strips(scene).new_image("Plain", os.path.join(folder, names[0]), 5, 1)
for name in names[1:]:  # grown the way scripts do (uninitialised sizes): not a Face Fusion strip, not ours to touch
    plain.elements.append(name)
bad = ff_addon.element_repair.bad_sizes(plain)
bpy.ops.wm.save_as_mainfile(filepath=os.path.join(project, "shot.blend"))
print("REOPEN", flush=True)
bpy.ops.wm.open_mainfile(filepath=os.path.join(project, "shot.blend"))
plain = ff_addon.compat.strips(bpy.context.scene)["Plain"]
print("RESULT " + json.dumps({"bad": bad, "bad_after": ff_addon.element_repair.bad_sizes(plain)}), flush=True)
"""


def test_opening_a_file_names_only_face_fusion_strips_that_need_repair(installed, media, tmp_path):
    """A Face Fusion strip saved by this version and a plain image strip (even one with uninitialised sizes) are
    opened without a word from the old-file repair, and the plain strip is left as the artist's script made it."""
    project = str(tmp_path / "project")
    os.makedirs(project)
    proc = subprocess.run([sys.executable, "-c", REOPEN % ARGS, media["plate"].replace("####", "0001"),
                           media["source"], project], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    r = _line(proc.stdout, "RESULT")
    after_open = proc.stderr + proc.stdout.split("REOPEN", 1)[1]
    assert "Face Fusion repair" not in after_open, after_open[-3000:]
    assert r["bad"] == r["bad_after"]  # untouched (whatever Blender left there)
