"""Bake targets: a Face Fusion strip or compositor node, seen as (plate, sources, settings, output folder).

``Target`` holds what the strip and the node share (cache key, folders, missing frames); ``StripTarget``
(strip_target.py) and ``NodeTarget`` (node_target.py) say where each finds its plate, which scene frames show
which plate frame, and how each is pointed at a folder. Finding targets is in ``lookup``, pointing them at the
folder of their current settings in ``retarget``.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import bpy

from . import cache_move, compat, coverage, ocio, plates, prefs, schema, session, sources
from .engine_link import cachekey_module, engine_module

RGBA_SUBDIR = "rgba"
FILE_PREFIX: str = engine_module("outputs").PREFIX


def output_name(frame: int) -> str:
    """The engine's own file name for ``frame`` (engine/outputs.py, stdlib only, ships with the add-on)."""
    return engine_module("outputs").output_name(frame)


def stored_dir(key: str, *, unsaved: bool) -> str:
    """The cache folder of ``key`` as Blender stores it: under the preferences' cache folder, which for an unsaved
    .blend and a '//' cache is the temporary folder (``cache_move`` moves it next to the .blend on the first save)."""
    root = prefs.get_prefs().cache_dir or prefs.DEFAULT_CACHE
    if root.startswith("//") and unsaved:
        root = cache_move.unsaved_root()
    return root.rstrip("/\\") + "/" + key + "/"


def cache_root() -> str:
    """The absolute folder holding this .blend's cache key folders."""
    return os.path.dirname(os.path.normpath(bpy.path.abspath(stored_dir("key", unsaved=not bpy.data.filepath))))


def shown_dir(stored: str) -> str:
    """The folder Blender reads inside a cache folder: the engine's files, or their RGBA copies (Blender < 5.0)."""
    return stored if compat.READS_MATTE_LAYERS else stored + RGBA_SUBDIR + "/"


@dataclass
class Target(ABC):
    scene: Any
    owner: Any  # the Face Fusion strip, or the Face Fusion node

    kind: ClassVar[str]  # "strip" | "node": for messages and to name the target across threads, never branched on
    owner_arg: ClassVar[str]  # the operators' property naming this kind of owner ("strip_name" | "node_name")

    @property
    def settings(self) -> Any:
        return self.owner.face_fusion

    @property
    def label(self) -> str:
        return f"{self.kind} '{self.owner.name}'"

    # -- what each kind knows
    @classmethod
    @abstractmethod
    def owner_named(cls, scene: Any, name: str) -> Any:
        """The scene's strip/node called ``name`` (None if gone); not checked to be a Face Fusion one."""

    @abstractmethod
    def plate_source(self) -> Any:
        """The strip or compositor node that provides the plate."""

    @abstractmethod
    def plate_media(self, source: Any) -> plates.PlateMedia:
        """The plate's media as read from ``plate_source()``."""

    @abstractmethod
    def timeline_frames(self, media: plates.PlateMedia) -> dict[int, int]:
        """{scene frame: plate frame} for every scene frame this target shows a plate frame on."""

    @abstractmethod
    def shows(self, directory: str, media: plates.PlateMedia) -> bool:
        """Whether the strip/node reads ``directory``'s files for the plate's frames (reads only)."""

    @abstractmethod
    def point(self, directory: str, media: plates.PlateMedia) -> None:
        """Make the strip/node read ``directory``'s files for the plate's frames (writes bpy data)."""

    @abstractmethod
    def show_landed_frame(self) -> None:
        """A new file is on disk during a bake: make Blender show it (main thread)."""

    @abstractmethod
    def reload_images(self) -> None:
        """After a render's bake: reload what Blender keeps in memory of the files (main thread)."""

    def panel_plate_label(self) -> str:
        """What the panel says about the plate ('' when the node graph shows it)."""
        return ""

    # -- shared
    def bake_range(self) -> tuple[int, int]:
        """Scene frames a Bake makes by default: the strip's/node's own frame range when it has one, else the
        scene's."""
        ff = self.settings
        if ff.use_frame_range:
            return ff.frame_range_start, max(ff.frame_range_start, ff.frame_range_end)
        return self.scene.frame_start, self.scene.frame_end

    def plate(self) -> plates.PlateMedia:
        media = self.plate_media(self.plate_source())
        if self.settings.colorspace != "auto":
            media.colorspace = self.settings.colorspace
        return media

    def needed(self, frame_start: int, frame_end: int, media: plates.PlateMedia | None = None) -> list[int]:
        """Plate frames needed to render scene frames frame_start..frame_end (inclusive)."""
        media = media or self.plate()
        mapping = self.timeline_frames(media)
        return sorted({p for f, p in mapping.items() if frame_start <= f <= frame_end})

    def cache_key(self, media: plates.PlateMedia | None = None, srcs: list | None = None) -> str:
        """Hash of settings (only those that apply), sources with their colour spaces, the plate, Blender's OCIO
        config and the version of the engine that will make the frames (the running one, if any)."""
        media = media or self.plate()
        srcs = sources.source_specs(self.settings) if srcs is None else srcs
        settings = schema.settings_dict(self.settings)
        ident = [{**({"path": s["path"]} if "path" in s else {"digest": s["digest"]}),
                  "colorspace": s.get("colorspace", "auto")} for s in srcs]
        plate = dict(media.as_request())
        plate["ocio_config"] = ocio.config_identity()
        return cachekey_module().cache_key(settings, ident, plate, [settings.get("swapper", "")],
                                           engine_version=session.engine_version())

    def output_dir(self, key: str | None = None) -> tuple[str, str]:
        """(path as stored in Blender, possibly '//'-relative; absolute path) of this target's cache folder."""
        key = key or self.settings.cache_key or self.cache_key()
        stored = stored_dir(key, unsaved=not bpy.data.filepath)
        return stored, os.path.abspath(bpy.path.abspath(stored))

    def display_dir(self, key: str | None = None) -> tuple[str, str]:
        """The folder Blender reads: the engine's own files, or their RGBA-only copies (Blender < 5.0)."""
        stored, absolute = self.output_dir(key)
        if compat.READS_MATTE_LAYERS:
            return stored, absolute
        return shown_dir(stored), os.path.join(absolute, RGBA_SUBDIR)

    def missing(self, frames: list[int], key: str | None = None, *, engine_files: bool = False) -> list[int]:
        """Frames whose file Blender reads (or, with ``engine_files``, the engine's file) does not exist."""
        _, folder = self.output_dir(key) if engine_files else self.display_dir(key)
        return [n for n in frames if not os.path.isfile(os.path.join(folder, output_name(n)))]

    # -- face coverage (coverage.py): writes the settings, main thread only
    def record_coverage(self, key: str, seen: Mapping[int, coverage.FrameFaces], read: Iterable[int] = ()) -> None:
        """Add to the coverage record of ``key`` the faces the engine reported (``seen``) and those the files of
        the frames ``read`` hold, for frames the record lacks (made earlier, on a farm, by another Blender)."""
        known = coverage.parse(self.settings.coverage)
        have = set(seen) | (set(known.frames) if known.key == key else set())
        found = dict(seen)
        found.update(coverage.read_files(self.output_dir(key)[1], [f for f in read if f not in have]))
        if found or known.key != key:
            coverage.record(self.settings, key, found)

    def refresh_coverage(self) -> None:
        """Read the coverage of every plate frame the strip/node shows from the files of its current folder."""
        key = self.settings.cache_key
        if key:
            self.record_coverage(key, {}, self.timeline_frames(self.plate()).values())
