"""Bake targets: a Face Fusion strip or compositor node, seen as (plate, sources, settings, output folder).

Everything the bake, the render handlers and the panels need to know about "what to render where" is here,
so the strip and the node behave the same.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import bpy

from . import compat, ocio, plates, prefs
from .engine_link import cachekey_module, engine_module
from .props import settings_dict

RGBA_SUBDIR = "rgba"
NODE_IDNAME = "CompositorNodeFaceFusion"
FILE_PREFIX: str = engine_module("outputs").PREFIX


def output_name(frame: int) -> str:
    """The engine's own file name for ``frame`` (engine/outputs.py, stdlib only, ships with the add-on)."""
    return engine_module("outputs").output_name(frame)


# ----------------------------------------------------------------------------------------------- sources


def image_pixels(image: Any) -> Any:
    """An image datablock's pixels as float32 (H, W, 4), top row first (Blender stores bottom row first)."""
    import numpy as np

    w, h = image.size
    if w == 0 or h == 0:
        raise plates.PlateError(f"image '{image.name}' has no pixels (is it loaded?)")
    buf = np.empty(w * h * 4, dtype=np.float32)
    image.pixels.foreach_get(buf)
    return np.ascontiguousarray(buf.reshape(h, w, 4)[::-1])


def _image_on_disk(image: Any) -> str:
    if image.packed_file is not None or image.source not in {"FILE", "SEQUENCE"}:
        return ""
    path = bpy.path.abspath(image.filepath, library=image.library)
    return path if path and os.path.isfile(path) else ""


def source_specs(group: Any) -> list[dict[str, Any]]:
    """Per source: {"path", "colorspace"} for files, {"image": Image, "digest"} for pixels in the .blend."""
    out = []
    for src in group.sources:
        if src.kind == "FILE":
            if not src.filepath:
                continue
            path = os.path.abspath(bpy.path.abspath(src.filepath))
            if not os.path.isfile(path):
                raise plates.PlateError(f"source photo '{path}' does not exist; pick the photo again")
            out.append({"path": path, "colorspace": "auto"})
        elif src.image is not None:
            image = src.image
            path = _image_on_disk(image)
            colorspace = image.colorspace_settings.name or "auto"
            if path:
                out.append({"path": path, "colorspace": colorspace})
            else:
                digest = (hashlib.sha256(bytes(image.packed_file.data)).hexdigest() if image.packed_file
                          else hashlib.sha256(image_pixels(image).tobytes()).hexdigest())
                out.append({"image": image, "digest": digest, "colorspace": colorspace})
    if not out:
        raise plates.PlateError("no source photo: add the photo of the new face in the Face Fusion panel")
    return out


# ----------------------------------------------------------------------------------------------- targets


@dataclass
class Target:
    scene: Any
    owner: Any  # the Face Fusion strip, or the Face Fusion node
    kind: str  # "strip" | "node"

    @property
    def settings(self) -> Any:
        return self.owner.face_fusion

    @property
    def label(self) -> str:
        return f"{'strip' if self.kind == 'strip' else 'node'} '{self.owner.name}'"

    # -- plate
    def plate_source(self) -> Any:
        """The strip or compositor node that provides the plate."""
        if self.kind == "strip":
            coll = compat.strips(self.scene)
            name = self.settings.plate_strip
            plate = coll.get(name) if coll is not None and name else None
            if plate is None:
                raise plates.PlateError(f"Face Fusion {self.label}: its plate strip '{name}' is gone; "
                                        "add Face Fusion again on the plate")
            return plate
        link = self.owner.inputs["Image"].links[0] if self.owner.inputs["Image"].is_linked else None
        node = link.from_node if link is not None else None
        while node is not None and node.bl_idname == "NodeReroute" and node.inputs[0].is_linked:
            node = node.inputs[0].links[0].from_node
        if node is None or node.bl_idname not in ("CompositorNodeImage", "CompositorNodeMovieClip"):
            raise plates.PlateError(f"Face Fusion {self.label}: link an Image or Movie Clip node to its Image input")
        return node

    def plate(self) -> plates.PlateMedia:
        src = self.plate_source()
        if self.kind == "strip":
            media = plates.from_strip(src)
        elif src.bl_idname == "CompositorNodeImage":
            if src.image is None:
                raise plates.PlateError(f"image node '{src.name}' has no image")
            media = plates.from_image(src.image, src.frame_duration)
        else:
            if src.clip is None:
                raise plates.PlateError(f"movie clip node '{src.name}' has no clip")
            media = plates.from_clip(src.clip)
        if self.settings.colorspace != "auto":
            media.colorspace = self.settings.colorspace
        return media

    def timeline_frames(self, media: plates.PlateMedia) -> dict[int, int]:
        """{scene frame: plate frame} for every scene frame this target shows a plate frame on."""
        if self.kind == "strip":
            s = self.owner
            out = {}
            skip = getattr(s, "animation_offset_start", 0)
            for f in range(int(s.frame_final_start), int(s.frame_final_end)):
                i = f - int(round(s.frame_start)) + int(skip)
                if 0 <= i < len(media.frames):
                    out[f] = media.frames[i]
            return out
        src = self.plate_source()
        out = {}
        for f in range(self.scene.frame_start, self.scene.frame_end + 1):
            if src.bl_idname == "CompositorNodeImage" and media.kind != "still":
                n = f - src.frame_start + 1 + src.frame_offset  # sequences: the image user numbers files alike
                if n in media.frames:
                    out[f] = n
            elif src.bl_idname == "CompositorNodeMovieClip":
                clip = src.clip
                n = f - clip.frame_start + 1 + clip.frame_offset
                if n in media.frames:
                    out[f] = n
            else:
                out[f] = media.frames[0]
        return out

    def needed(self, frame_start: int, frame_end: int, media: plates.PlateMedia | None = None) -> list[int]:
        """Plate frames needed to render scene frames frame_start..frame_end (inclusive)."""
        media = media or self.plate()
        mapping = self.timeline_frames(media)
        return sorted({p for f, p in mapping.items() if frame_start <= f <= frame_end})

    # -- cache
    def cache_key(self, media: plates.PlateMedia | None = None, sources: list | None = None) -> str:
        """Hash of settings (only those that apply), sources with their colour spaces, the plate, Blender's OCIO
        config and the version of the engine that will make the frames (the running one, if any)."""
        from . import session  # late: session imports targets lazily too

        media = media or self.plate()
        sources = source_specs(self.settings) if sources is None else sources
        settings = settings_dict(self.settings)
        ident = [{**({"path": s["path"]} if "path" in s else {"digest": s["digest"]}),
                  "colorspace": s.get("colorspace", "auto")} for s in sources]
        plate = dict(media.as_request())
        plate["ocio_config"] = ocio.config_identity()
        return cachekey_module().cache_key(settings, ident, plate, [settings.get("swapper", "")],
                                           engine_version=session.engine_version())

    def output_dir(self, key: str | None = None) -> tuple[str, str]:
        """(path as stored in Blender, possibly '//'-relative; absolute path) of this target's cache folder."""
        key = key or self.settings.cache_key or self.cache_key()
        root = prefs.get_prefs().cache_dir or prefs.DEFAULT_CACHE
        if root.startswith("//") and not bpy.data.filepath:
            root = os.path.join(tempfile.gettempdir(), "face_fusion_cache")  # unsaved .blend: nowhere else to go
        stored = root.rstrip("/\\") + "/" + key + "/"
        return stored, os.path.abspath(bpy.path.abspath(stored))

    def display_dir(self, key: str | None = None) -> tuple[str, str]:
        """The folder Blender reads: the engine's own files, or their RGBA-only copies (Blender < 5.0)."""
        stored, absolute = self.output_dir(key)
        if compat.READS_MATTE_LAYERS:
            return stored, absolute
        return stored + RGBA_SUBDIR + "/", os.path.join(absolute, RGBA_SUBDIR)

    def missing(self, frames: list[int], key: str | None = None, *, engine_files: bool = False) -> list[int]:
        """Frames whose file Blender reads (or, with ``engine_files``, the engine's file) does not exist."""
        _, folder = self.output_dir(key) if engine_files else self.display_dir(key)
        return [n for n in frames if not os.path.isfile(os.path.join(folder, output_name(n)))]


def target_of(owner: Any) -> Target:
    scene = owner.id_data
    if isinstance(scene, bpy.types.Scene):
        return Target(scene, owner, "strip")
    # a node: id_data is the node tree; find the scene whose compositor uses it (or any scene)
    for sc in bpy.data.scenes:
        tree = compat.compositor_tree(sc)
        if tree is not None and tree == scene:
            return Target(sc, owner, "node")
    return Target(bpy.context.scene, owner, "node")


def owner_of_settings(group: Any) -> Any:
    """The strip or node holding this FaceFusionSettings (or one of its sources); None for a stray group.

    Found by pointer: RNA cannot build a path for a property group nested in a strip."""
    idd = group.id_data
    ptr = group.as_pointer()
    if isinstance(idd, bpy.types.Scene):
        candidates = compat.strips(idd) or []
    elif isinstance(idd, bpy.types.NodeTree):
        candidates = idd.nodes
    else:
        return None
    for owner in candidates:
        ff = getattr(owner, "face_fusion", None)
        if ff is not None and (ff.as_pointer() == ptr or any(s.as_pointer() == ptr for s in ff.sources)):
            return owner
    return None


def is_face_fusion_strip(strip: Any) -> bool:
    return strip.type == "IMAGE" and bool(strip.face_fusion.plate_strip)


def scene_targets(scene: Any) -> list[Target]:
    out = []
    coll = compat.strips(scene)
    if coll is not None:
        out += [Target(scene, s, "strip") for s in coll if is_face_fusion_strip(s) and not s.mute]
    tree = compat.compositor_tree(scene)
    if tree is not None:
        out += [Target(scene, n, "node") for n in tree.nodes if n.bl_idname == NODE_IDNAME and not n.mute]
    return out


def current_key(target: Target) -> tuple[str, str, plates.PlateMedia | None]:
    """(key, error, plate media) of the target's current settings, plate and sources. Reads only: safe from the
    render thread. No plate: ('', error, None). No source photo: (key, error, media), the key the frames will
    have once one is added being irrelevant (the strip still gets its frames and timing)."""
    try:
        media = target.plate()
    except (plates.PlateError, OSError, ValueError) as exc:
        return "", str(exc), None
    try:
        sources, error = source_specs(target.settings), ""
    except (plates.PlateError, OSError) as exc:
        sources, error = [], str(exc)
    return target.cache_key(media, sources), error, media


def is_pointed(target: Target, key: str, media: plates.PlateMedia) -> bool:
    """Whether the strip/node already shows ``key``'s folder for the plate's frames (reads only)."""
    settings = target.settings
    stored, _ = target.output_dir(key)
    shown, _ = target.display_dir(key)
    if settings.cache_key != key or settings.cache_dir != stored:
        return False
    if target.kind == "strip":
        strip = target.owner
        return strip.directory == shown and [e.filename for e in strip.elements] == [
            output_name(n) for n in media.frames]
    tree = target.owner.node_tree
    from . import node

    face = tree.nodes.get(node.FACE_NODE) if tree is not None else None
    image = face.image if face is not None else None
    return image is not None and image.filepath == shown + output_name(media.frames[0])


def retarget(target: Target) -> str:
    """Point the strip/node at the cache folder of its current settings; returns the key ('' if not ready).

    Writes bpy data: main thread only (never from a UI render's handlers)."""
    settings = target.settings
    key, error, media = current_key(target)
    if media is None:
        settings.last_error = error
        return ""
    if settings.last_error != error:
        settings.last_error = error
    stored, _ = target.output_dir(key)
    shown, _ = target.display_dir(key)
    if settings.cache_key != key:
        settings.cache_key = key
    if settings.cache_dir != stored:
        settings.cache_dir = stored
    if target.kind == "strip":
        from . import sequencer

        sequencer.point_strip(target.owner, shown, media)
    else:
        from . import node

        node.point_node(target.owner, shown, media)
    return key


def retarget_owner(group: Any) -> None:
    owner = owner_of_settings(group)
    if owner is None:
        return
    if isinstance(owner.id_data, bpy.types.Scene) and not is_face_fusion_strip(owner):
        return
    retarget(target_of(owner))

