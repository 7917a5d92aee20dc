"""Blender tests: the real ``bpy`` module (4.2 LTS or 5.0, each in its own venv without the engine's packages)
with the extension zip installed through Blender's extension machinery, and the real engine as a subprocess.

Collected only where ``bpy`` is importable: the engine's venv (``pytest tests -m "not blender"``) skips
this folder entirely.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

HAVE_BPY = importlib.util.find_spec("bpy") is not None
collect_ignore_glob = [] if HAVE_BPY else ["test_*.py"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
ENGINE_PYTHON = os.environ.get("FACE_FUSION_ENGINE_PYTHON") or os.path.join(ROOT, ".venv", "bin", "python")
ADDON = "bl_ext.user_default.face_fusion"

# Blender reads these when bpy is first imported: an isolated user folder (preferences, extensions).
if HAVE_BPY and "BLENDER_USER_RESOURCES" not in os.environ:
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="ff-blender-user-")
os.environ.setdefault("FACE_FUSION_ENGINE_PYTHON", ENGINE_PYTHON)
os.environ.setdefault("FACE_FUSION_ENGINE_ROOT", ROOT)


_SESSION_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _SESSION_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The runner's own exit on bpy 4.2 (issue 11, item 15; bench/RELIABILITY.md): bpy 4.2 tears down only when
    the ``bpy`` module is freed during finalisation, and anything a test left with Blender's C side (a timer, a
    handler, a class of a test's own) keeps it alive, so about one run in nine the runner segfaulted after every
    test had passed and been reported. Everything is reported by now: the runner ends with pytest's own status,
    after flushing and removing Blender's session temp folder, as ``addon/at_exit.end_process`` does for renders.
    5.0 finalises cleanly and exits the normal way."""
    if not HAVE_BPY or not _SESSION_STATUS:
        return
    import bpy

    if bpy.app.version >= (5, 0, 0):
        return
    tempdir = bpy.app.tempdir
    if tempdir and os.path.basename(os.path.normpath(tempdir)).startswith("blender_"):
        shutil.rmtree(tempdir, ignore_errors=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(_SESSION_STATUS[-1])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "blender: needs the real bpy module (runs in a Blender venv)")
    # The audit log, analysis cache, consent store and signing chain of the tests: tests/conftest.py, which runs
    # for these tests too.


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if str(item.fspath).startswith(HERE):
            item.add_marker(pytest.mark.blender)


def engine_run(*args: str, timeout: float = 600) -> str:
    """Run a helper with the engine's Python; returns stdout."""
    proc = subprocess.run([ENGINE_PYTHON, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(args[:3])} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def read_images(paths: list[str], tmp: str) -> list[dict]:
    """[{"rgba": (H,W,4) linear, "<channel>": (H,W)}...] read by the engine's OpenImageIO."""
    import numpy as np

    out = os.path.join(tmp, f"read_{len(os.listdir(tmp))}.npz")
    engine_run(os.path.join(HERE, "read_images.py"), out, *paths)
    data = np.load(out)
    result = []
    for i in range(len(paths)):
        entry = {"rgba": data[str(i)]}
        for key in data.files:
            if key.startswith(f"{i}:"):
                entry[key.split(":", 1)[1]] = data[key]
        result.append(entry)
    return result


def exr_attributes(folder: str, frames: list[int]) -> dict[int, dict[str, str]]:
    """{frame: the string attributes of the engine's EXR of that frame in ``folder``}, read by OpenImageIO."""
    paths = [os.path.join(folder, f"facefusion.{f:04d}.exr") for f in frames]
    read = json.loads(engine_run(os.path.join(HERE, "read_attributes.py"), *paths))
    return {f: read[p] for f, p in zip(frames, paths, strict=True)}


class DrawnLayout:
    """Records what a panel draws (Blender's UILayout exists only inside a window's draw call): labels, props and
    operators (whose returned properties the panel fills in); every other layout call makes a child layout. Like
    Blender's, a child of an inactive (greyed-out) or disabled layout is inactive too: ``shown`` records each label
    and prop with whether it is drawn active."""

    def __init__(self, drawn: list, icons: list | None = None, shown: list | None = None,
                 parent: DrawnLayout | None = None) -> None:
        self.drawn = drawn
        self.icons = [] if icons is None else icons  # (label text, icon)
        self.shown = [] if shown is None else shown  # (kind, label text or property name, drawn active)
        self.parent = parent
        self.active = self.enabled = True

    def _live(self) -> bool:
        return self.active and self.enabled and (self.parent is None or self.parent._live())

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: DrawnLayout(self.drawn, self.icons, self.shown, self)  # row, box, ...

    def label(self, text: str = "", icon: str = "NONE", **_) -> None:
        self.drawn.append(("label", text))
        self.icons.append((text, icon))
        self.shown.append(("label", text, self._live()))

    def prop(self, data, name: str, **_) -> None:
        self.drawn.append(("prop", name))
        self.shown.append(("prop", name, self._live()))

    def operator(self, idname: str, text: str = "", icon: str = "NONE", **_):
        op = type("Op", (), {})()
        self.drawn.append(("operator", idname, text, op))
        return op


@pytest.fixture(scope="session")
def ext_zip(tmp_path_factory: pytest.TempPathFactory) -> str:
    sys.path.insert(0, os.path.join(ROOT, "packaging"))
    import build_extension

    return build_extension.build(str(tmp_path_factory.mktemp("dist")))


@pytest.fixture(scope="session")
def installed(ext_zip: str, tmp_path_factory: pytest.TempPathFactory):
    """The extension installed from its zip and enabled through Blender's extension machinery."""
    import bpy

    result = bpy.ops.extensions.package_install_files(filepath=ext_zip, repo="user_default",
                                                      enable_on_install=True)
    assert result == {"FINISHED"}, result
    assert ADDON in bpy.context.preferences.addons, list(bpy.context.preferences.addons.keys())
    prefs = bpy.context.preferences.addons[ADDON].preferences
    prefs.engine_python = ENGINE_PYTHON
    prefs.engine_root = ROOT
    prefs.cache_dir = str(tmp_path_factory.mktemp("cache"))
    bpy.ops.wm.save_userpref()  # a fresh Blender process (batch test) starts with the add-on enabled
    yield ADDON
    sys.modules[ADDON + ".addon"].session.forget()


@pytest.fixture()
def addon(installed):
    """The add-on package (``<ext>.addon``) as currently loaded (re-enabling reloads it)."""
    return sys.modules[installed + ".addon"]


@pytest.fixture(scope="session")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = str(tmp_path_factory.mktemp("media"))
    info = json.loads(engine_run(os.path.join(HERE, "make_media.py"), out, "--frames", "5", "--size", "192"))
    info["dir"] = out
    return info


@pytest.fixture(scope="session")
def long_media(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A longer, smaller plate, for bakes that get interrupted."""
    out = str(tmp_path_factory.mktemp("long_media"))
    info = json.loads(engine_run(os.path.join(HERE, "make_media.py"), out, "--frames", "12", "--size", "160"))
    info["dir"] = out
    return info


@pytest.fixture()
def cache_dir(addon, tmp_path) -> str:
    """A cache folder of this test's own, under the session's engine-allowed root."""
    import bpy

    prefs = bpy.context.preferences.addons[ADDON].preferences
    folder = str(tmp_path / "ff_cache")
    os.makedirs(folder, exist_ok=True)
    old = prefs.cache_dir
    prefs.cache_dir = folder
    yield folder
    prefs.cache_dir = old


@pytest.fixture()
def scene(addon, tmp_path):
    import bpy

    sc = bpy.data.scenes.new(f"FF {tmp_path.name}"[:60])
    sc.render.resolution_x = sc.render.resolution_y = 192
    sc.render.resolution_percentage = 100
    sc.frame_start, sc.frame_end = 1, 5
    sc.render.image_settings.file_format = "OPEN_EXR"
    sc.render.image_settings.color_depth = "32"
    sc.render.filepath = str(tmp_path / "render" / "frame_####")
    sc.render.use_sequencer = True
    sc.render.dither_intensity = 0.0
    sc.view_settings.view_transform = "Standard"
    sc.view_settings.look = "None"
    yield sc
    addon.handlers.FAILURES.clear()


# For the scripts run in a fresh Blender (subprocess tests): a Face Fusion strip over a plate sequence.
SESSION_SHOT = """
def new_shot(ff_addon, plate_file, source, frames):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    folder = os.path.dirname(plate_file)
    names = sorted(f for f in os.listdir(folder) if f.endswith(".png"))
    plate = ff_addon.compat.top_strips(scene).new_image("Plate", os.path.join(folder, names[0]), 1, 1)
    ff_addon.strip_target.set_elements(plate, folder + os.sep, names)
    strip = ff_addon.sequencer.add_face_fusion(scene, plate)
    strip.face_fusion.sources.add().filepath = source
    return scene, strip
"""


def face_fusion_shot(addon, scene, media):
    """A 160 px scene with the plate and a Face Fusion strip above it (source photo set)."""
    scene.frame_start, scene.frame_end = 1, media["frames"]
    scene.render.resolution_x = scene.render.resolution_y = 160
    strip = addon.sequencer.add_face_fusion(scene, add_plate(scene, media))
    strip.face_fusion.sources.add().filepath = media["source"]
    return strip


def add_plate(scene, media: dict, channel: int = 1, frame_start: int = 1):
    """An image strip of the media's plate sequence."""
    addon = sys.modules[ADDON + ".addon"]
    folder = os.path.dirname(media["plate"])
    names = sorted(f for f in os.listdir(folder) if f.endswith(".png"))
    strip = addon.compat.top_strips(scene).new_image("Plate", os.path.join(folder, names[0]), channel, frame_start)
    for name in names[1:]:
        strip.elements.append(name)
    return strip


def blank_plate(media: dict, folder: str, frames: tuple[int, ...]) -> dict:
    """The media's plate copied to ``folder`` with ``frames`` replaced by a flat grey image (no face to find)."""
    import bpy
    import numpy as np

    os.makedirs(folder)
    src = os.path.dirname(media["plate"])
    for name in sorted(os.listdir(src)):
        shutil.copy(os.path.join(src, name), folder)
    image = bpy.data.images.new("ff blank", 192, 192)
    image.pixels.foreach_set(np.full(192 * 192 * 4, 0.4, np.float32))
    for frame in frames:
        path = os.path.join(folder, os.path.basename(media["plate"]).replace("####", f"{frame:04d}"))
        image.filepath_raw, image.file_format = path, "PNG"
        image.save()
    bpy.data.images.remove(image)
    return {**media, "plate": os.path.join(folder, os.path.basename(media["plate"]))}


def render_animation(scene) -> list[str]:
    import bpy

    with bpy.context.temp_override(scene=scene):
        bpy.ops.render.render(animation=True, scene=scene.name)
    folder = os.path.dirname(bpy.path.abspath(scene.render.filepath))
    return [os.path.join(folder, f"frame_{f:04d}.exr") for f in range(scene.frame_start, scene.frame_end + 1)]
