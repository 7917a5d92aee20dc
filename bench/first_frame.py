"""Time to the first baked frame of a fresh shot in the add-on, and to its first look (issue 36).

A 640x360 plate of 275 frames (PNG, 8-bit sRGB) is made once in /tmp from ../shared/data footage: by default
``clips/mead_w040_laughing.mp4`` (1920x1080, 165 frames) scaled to 640x360, played forward and then back from its
second-to-last frame (165 + 110 frames: one shot, no cut). The source is ``photos/paul_rudd.jpg`` at 384 px.

Each run, in the real ``bpy`` module with the extension installed from its zip: a fresh add-on cache folder, a fresh
engine analysis cache ($FACE_FUSION_CACHE_DIR) and so a freshly started engine (started before the clock, models
not loaded yet), a new scene with the plate and a Face Fusion strip. The clock starts when the Bake operator's own
``invoke`` is called (the UI path: ``bpy.app.background`` reads False for it) and its ``modal`` is then called with
a timer event every 0.1 s, as Blender's window does. It records:

- look: the first tick on which the panel shows the marked preview (the strip's preview image is the first look);
- disk: the first baked frame's EXR on disk (its modification time);
- shown: the first frame handed to Blender (``op_bake.frame_landed``); on Blender < 5.0 the RGBA copy it reads;
- analysed: the tick on which the engine's shot analysis reported done of total.

Then Esc, as the artist would; the rest of the bake is not made. A bench, never a test: it records, asserts nothing.

Usage (the engine's venv drives one child per Blender venv):
    .venv/bin/python bench/first_frame.py [--blender 5.0 4.2] [--runs 3]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
WORK = os.path.join(tempfile.gettempdir(), "ff_first_frame")
SIZE, FRAMES = (640, 360), 275
UNSET = -(1 << 30)
ADDON = "bl_ext.user_default.face_fusion"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


# -- the media (engine venv: PyAV and OpenCV)
def make_media(clip: str) -> dict:
    """The plate (WORK/<clip>_640x360/plate.0001.png ...) and the source photo, made once."""
    import av
    import cv2

    name = os.path.splitext(os.path.basename(clip))[0]
    folder = os.path.join(WORK, f"{name}_{SIZE[0]}x{SIZE[1]}_{FRAMES}")
    source = os.path.join(WORK, "source_paul_rudd_384.png")
    if not os.path.isfile(source):
        os.makedirs(WORK, exist_ok=True)
        photo = cv2.imread(os.path.join(DATA, "photos", "paul_rudd.jpg"))
        scale = 384 / max(photo.shape[:2])
        cv2.imwrite(source, cv2.resize(photo, (round(photo.shape[1] * scale), round(photo.shape[0] * scale)),
                                       interpolation=cv2.INTER_AREA))
    if len(glob.glob(os.path.join(folder, "plate.*.png"))) != FRAMES:
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        with av.open(clip) as c:
            decoded = [f.to_ndarray(format="bgr24") for f in c.decode(video=0)]
        order = list(range(len(decoded)))
        while len(order) < FRAMES:  # forward, then back (a ping-pong: the same shot, no cut)
            order += order[-2::-1][: FRAMES - len(order)]
        for i, n in enumerate(order[:FRAMES]):
            frame = decoded[n]
            h, w = frame.shape[:2]
            cw, ch = min(w, h * SIZE[0] // SIZE[1]), min(h, w * SIZE[1] // SIZE[0])  # centre crop to 16:9
            frame = frame[(h - ch) // 2:(h - ch) // 2 + ch, (w - cw) // 2:(w - cw) // 2 + cw]
            cv2.imwrite(os.path.join(folder, f"plate.{i + 1:04d}.png"),
                        cv2.resize(frame, SIZE, interpolation=cv2.INTER_AREA))
    return {"plate_dir": folder, "source": source, "frames": FRAMES, "clip": clip}


# -- one run (Blender venv)
class _App:
    """``bpy.app`` as a window's Blender sees it: not background, so the operator's invoke takes the UI path."""

    background = False

    def __getattr__(self, name: str):
        import bpy

        return getattr(bpy.app, name)


class _Bpy:
    app = _App()

    def __getattr__(self, name: str):
        import bpy

        return getattr(bpy, name)


def _install(work: str):
    import bpy

    sys.path.insert(0, os.path.join(ROOT, "packaging"))
    import build_extension

    zip_path = build_extension.build(os.path.join(work, "dist"))
    result = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default",
                                                      enable_on_install=True)
    if result != {"FINISHED"}:
        raise SystemExit(f"the extension did not install: {result}")
    prefs = bpy.context.preferences.addons[ADDON].preferences
    prefs.engine_python = os.environ["FACE_FUSION_ENGINE_PYTHON"]
    prefs.engine_root = ROOT
    return sys.modules[ADDON + ".addon"], prefs


def _shot(addon, media: dict, run: int):
    import bpy

    scene = bpy.data.scenes.new(f"FF first frame {run}")
    scene.render.resolution_x, scene.render.resolution_y = SIZE
    scene.render.resolution_percentage = 100
    scene.frame_start, scene.frame_end = 1, media["frames"]
    names = sorted(f for f in os.listdir(media["plate_dir"]) if f.endswith(".png"))
    plate = addon.compat.top_strips(scene).new_image("Plate", os.path.join(media["plate_dir"], names[0]), 1, 1)
    for name in names[1:]:
        plate.elements.append(name)
    strip = addon.sequencer.add_face_fusion(scene, plate)
    strip.face_fusion.sources.add().filepath = media["source"]
    return scene, strip


def _files(folder: str) -> list[str]:
    return glob.glob(os.path.join(folder, "facefusion.*.exr"))


def one_run(addon, prefs, media: dict, run: int, work: str, keep: bool) -> dict:
    import bpy
    import numpy as np

    fresh = tempfile.mkdtemp(prefix=f"run{run}-", dir=work)
    os.environ["FACE_FUSION_CACHE_DIR"] = os.path.join(fresh, "engine_cache")  # the engine reads it when it starts
    prefs.cache_dir = os.path.join(fresh, "ff_cache")
    os.makedirs(prefs.cache_dir)
    scene, strip = _shot(addon, media, run)
    addon.session.forget()
    t = time.monotonic()
    engine = addon.session.get()  # a fresh engine, before the clock: its models load in the first job
    engine_start = time.monotonic() - t

    op_bake = addon.op_bake
    landed: list[float] = []
    original_landed = op_bake.frame_landed

    def frame_landed(item, frame):
        landed.append(time.time())
        original_landed(item, frame)

    runtime = bpy.context.window_manager.face_fusion_runtime
    wm = SimpleNamespace(face_fusion_runtime=runtime, windows=[], progress_begin=lambda a, b: None,
                         progress_update=lambda v: None, progress_end=lambda: None,
                         event_timer_add=lambda step, window=None: object(), event_timer_remove=lambda timer: None,
                         modal_handler_add=lambda op: None)
    ctx = SimpleNamespace(window=object(), window_manager=wm, workspace=None, scene=scene, sequencer_scene=scene)
    cls = op_bake.FACEFUSION_OT_bake
    reports: list = []
    op = SimpleNamespace(strip_name=strip.name, node_name="", all_targets=False, frame_start=UNSET, frame_end=UNSET,
                         report=lambda kind, msg: reports.append(msg), _timer=None, _run=None)
    for name in ("_targets", "_range", "_refused", "_reported", "execute", "_tick", "_finish", "_end_ui",
                 "_finish_closed", "modal"):
        setattr(op, name, getattr(cls, name).__get__(op))
    load_before = load()
    op_bake.bpy, op_bake.frame_landed = _Bpy(), frame_landed
    try:
        t0, w0 = time.monotonic(), time.time()
        state = cls.invoke(op, ctx, SimpleNamespace(type="LEFTMOUSE"))
    finally:
        op_bake.bpy, op_bake.frame_landed = bpy, original_landed
    invoked = time.monotonic() - t0
    if state != {"RUNNING_MODAL"}:
        raise SystemExit(f"the bake did not start: {state} {reports}")
    bake_run = op._run
    item = bake_run.items[0]
    display = item.target.display_dir()[1]
    marks: dict = {}
    look: dict = {}
    lines: list[str] = []
    tick = 0.1
    while True:
        at = time.monotonic()
        state = op.modal(ctx, SimpleNamespace(type="TIMER"))
        now = time.monotonic() - t0
        if runtime.message and (not lines or lines[-1] != runtime.message):
            lines.append(runtime.message)
        look_image = addon.first_look.image_name(item.target)
        if "look" not in marks and runtime.first_look and strip.face_fusion.preview_image is not None \
                and strip.face_fusion.preview_image.name == look_image:
            marks["look"] = now
            image = strip.face_fusion.preview_image
            pixels = np.empty(image.size[0] * image.size[1] * 4, np.float32)
            image.pixels.foreach_get(pixels)
            look = {"size": tuple(image.size), "range": round(float(np.ptp(pixels)), 3)}
        ev = item.analysis
        if ev and "analysis_start" not in marks:
            marks["analysis_start"] = now
        if ev and int(ev.get("done", 0)) >= int(ev.get("total", 1)) and "analysed" not in marks:
            marks["analysed"] = now
        made = _files(item.folder)
        if made and "disk" not in marks:
            marks["disk_tick"] = now
            marks["disk"] = min(os.stat(p).st_mtime for p in made) - w0
            first = min(made)
            if keep:  # the first baked frame, for a look at it
                shutil.copy(first, os.path.join(WORK, f"first_{bpy.app.version_string[:3]}_{run}.exr"))
        shown = _files(display)
        if shown and landed and "shown" not in marks:
            marks["shown"] = max(min(landed), min(os.stat(p).st_mtime for p in shown)) - w0
        if state != {"RUNNING_MODAL"} or ("shown" in marks and "disk" in marks):
            break
        if now > 900:
            marks["timeout"] = now
            break
        time.sleep(max(0.0, tick - (time.monotonic() - at)))
    load_after = load()
    state = op.modal(ctx, SimpleNamespace(type="ESC"))
    end = time.monotonic() + 300
    while state == {"RUNNING_MODAL"} and time.monotonic() < end:
        time.sleep(tick)
        state = op.modal(ctx, SimpleNamespace(type="TIMER"))
    restarted = addon.session._SESSION is not engine
    faces = addon.coverage.parse(strip.face_fusion.coverage).frames
    addon.session.forget()
    bpy.data.scenes.remove(scene)
    shutil.rmtree(fresh, ignore_errors=True)
    return {"run": run, "bpy": bpy.app.version_string, "engine_start_s": round(engine_start, 2),
            "invoke_s": round(invoked, 2), **{k: round(v, 2) for k, v in marks.items()},
            "look_frame": bake_run.look.frame if bake_run.look is not None else None, "look_image": look,
            "faces_first_frame": faces.get(min(faces)) if faces else None,
            "engine_restarted_in_bake": restarted, "load_before": load_before, "load_after": load_after,
            "lines": lines[:3] + ["..."] + lines[-3:] if len(lines) > 7 else lines, "end": sorted(state)}


def child(args: argparse.Namespace) -> int:
    media = json.loads(args.media)
    work = tempfile.mkdtemp(prefix="ff-first-frame-")
    os.environ["BLENDER_USER_RESOURCES"] = os.path.join(work, "user")
    os.environ["FACE_FUSION_AUDIT_LOG"] = os.path.join(work, "audit.jsonl")
    os.environ["FACE_FUSION_CONSENT_FILE"] = os.path.join(work, "consent.json")
    os.environ["FACE_FUSION_CONSENT_ALL"] = "bench: public test photo from ../shared/data"
    os.environ["FACE_FUSION_C2PA_DIR"] = os.path.join(work, "c2pa")
    try:
        addon, prefs = _install(work)
        for run in range(1, args.runs + 1):
            print(json.dumps(one_run(addon, prefs, media, run, work, args.keep)), flush=True)
        addon.session.forget()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.flush()
    os._exit(0)  # bpy 4.2 may crash in its own teardown (bench/RELIABILITY.md); every figure is printed


def median(rows: list[dict], key: str) -> str:
    values = [r[key] for r in rows if key in r]
    return f"{statistics.median(values):.1f}" if values else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blender", nargs="+", default=["5.0", "4.2"], help="the .venv-bpy-<version> venvs to use")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clip", default=os.path.join(DATA, "clips", "mead_w040_laughing.mp4"))
    ap.add_argument("--keep", action="store_true", help="copy each run's first baked frame to " + WORK)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--media", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    media = make_media(args.clip)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--short", "addon", "engine"], cwd=ROOT, capture_output=True,
                           text=True).stdout.split("\n")
    print(f"plate {media['plate_dir']} ({FRAMES} frames {SIZE[0]}x{SIZE[1]}), source {media['source']}")
    print(f"commit {head.strip()}, uncommitted in addon/ engine/: {[d for d in dirty if d] or 'none'}; "
          f"{os.cpu_count()} CPUs, load {load()}", flush=True)
    env = {**os.environ, "FACE_FUSION_ENGINE_PYTHON": sys.executable, "FACE_FUSION_ENGINE_ROOT": ROOT}
    summary = []
    for version in args.blender:
        python = os.path.join(ROOT, f".venv-bpy-{version}", "bin", "python")
        proc = subprocess.Popen([python, os.path.abspath(__file__), "--child", "--runs", str(args.runs),
                                 "--media", json.dumps(media), *(["--keep"] if args.keep else [])],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        rows = []
        for line in proc.stdout:
            if line.startswith("{"):
                rows.append(json.loads(line))
                print(line.rstrip(), flush=True)
        proc.wait()
        bpy = rows[0]["bpy"] if rows else version
        summary.append(f"bpy {bpy}: {len(rows)} runs, median s from invoke: look {median(rows, 'look')}, "
                       f"analysed {median(rows, 'analysed')}, first frame on disk {median(rows, 'disk')}, "
                       f"shown {median(rows, 'shown')} (engine start, before the clock: "
                       f"{median(rows, 'engine_start_s')})")
    print("\n".join(summary))
    print(f"load at the end {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
