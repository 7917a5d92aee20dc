"""Source photos (the new face) of a strip or node, as the engine request and the cache key need them."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import bpy

from . import images, plates


def _image_on_disk(image: Any) -> str:
    if image.packed_file is not None or image.source not in {"FILE", "SEQUENCE"}:
        return ""
    path = bpy.path.abspath(image.filepath, library=image.library)
    return path if path and os.path.isfile(path) else ""


def _digest(image: Any) -> str:
    if image.packed_file:
        return hashlib.sha256(bytes(image.packed_file.data)).hexdigest()
    try:
        return hashlib.sha256(images.image_pixels(image).tobytes()).hexdigest()
    except images.ImageError as exc:  # callers handle a source they cannot use as a plate problem
        raise plates.PlateError(str(exc)) from exc


def source_spec(src: Any) -> dict[str, Any] | None:
    """One source entry: {"path", "colorspace"} for files, {"image": Image, "digest"} for pixels in the .blend;
    None for an entry naming no photo."""
    if src.kind == "FILE":
        if not src.filepath:
            return None
        path = os.path.abspath(bpy.path.abspath(src.filepath))
        if not os.path.isfile(path):
            raise plates.PlateError(f"source photo '{path}' does not exist; pick the photo again")
        return {"path": path, "colorspace": "auto"}
    if src.image is None:
        return None
    image = src.image
    path = _image_on_disk(image)
    colorspace = image.colorspace_settings.name or "auto"
    if path:
        return {"path": path, "colorspace": colorspace}
    return {"image": image, "digest": _digest(image), "colorspace": colorspace}


def source_specs(group: Any) -> list[dict[str, Any]]:
    """Per source entry naming a photo: its ``source_spec``."""
    out = [spec for spec in map(source_spec, group.sources) if spec is not None]
    if not out:
        raise plates.PlateError("no source photo: add the photo of the new face in the Face Fusion panel")
    return out
