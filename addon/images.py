"""Pixels between Blender image datablocks and numpy arrays (float32, (H, W, 4), top row first)."""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np


class ImageError(ValueError):
    """An image has no pixels to hand over; the message says which and why."""


def image_pixels(image: Any) -> np.ndarray:
    """An image datablock's pixels as float32 (H, W, 4), top row first (Blender stores bottom row first)."""
    w, h = image.size
    if w == 0 or h == 0:
        raise ImageError(f"image '{image.name}' has no pixels (is it loaded?)")
    buf = np.empty(w * h * 4, dtype=np.float32)
    image.pixels.foreach_get(buf)
    return np.ascontiguousarray(buf.reshape(h, w, 4)[::-1])


def image_from_pixels(name: str, pixels: np.ndarray, colorspace: str = "") -> Any:
    """A float Blender image named ``name`` holding ``pixels`` (H, W, C float32, top row first), reused if any."""
    h, w = pixels.shape[:2]
    image = bpy.data.images.get(name)
    if image is None or tuple(image.size) != (w, h):
        if image is not None:
            bpy.data.images.remove(image)
        image = bpy.data.images.new(name, w, h, alpha=True, float_buffer=True)
    if colorspace and image.colorspace_settings.name != colorspace:
        try:  # before the pixels: changing it regenerates a generated image's buffer
            image.colorspace_settings.name = colorspace
        except TypeError:
            pass
    rgba = np.ones((h, w, 4), np.float32)
    rgba[..., : pixels.shape[2]] = pixels[..., :4]
    image.pixels.foreach_set(np.ascontiguousarray(rgba[::-1]).ravel())
    image.update()
    return image
