"""Read EXR/PNG files into one .npz with the engine's environment (OpenImageIO lives there, not in Blender's).

    <engine python> tests/blender/read_images.py OUT.npz FILE...

Each file becomes float32 (H, W, C) scene-linear (8-bit files are sRGB-decoded), top row first; EXR channels
beyond RGBA are stored as '<index>:<channel name>' entries.
"""

from __future__ import annotations

import sys

import numpy as np
import OpenImageIO as oiio


def srgb_decode(x: np.ndarray) -> np.ndarray:
    return np.where(x <= 0.04045, x / 12.92, ((np.maximum(x, 0.04045) + 0.055) / 1.055) ** 2.4).astype(np.float32)


def main() -> int:
    out, files = sys.argv[1], sys.argv[2:]
    arrays = {}
    for i, path in enumerate(files):
        buf = oiio.ImageBuf(path)
        spec = buf.spec()
        px = buf.get_pixels(oiio.FLOAT)
        if px is None or px.size == 0:
            raise SystemExit(f"cannot read {path}: {buf.geterror()}")
        px = px.reshape(spec.height, spec.width, spec.nchannels).astype(np.float32)
        names = list(spec.channelnames)
        if not path.lower().endswith(".exr"):
            px[..., :3] = srgb_decode(px[..., :3])
        rgba = np.ones((spec.height, spec.width, 4), np.float32)
        n = min(4, px.shape[2])
        rgba[..., :n] = px[..., :n]
        arrays[str(i)] = rgba
        for c, name in enumerate(names[4:], start=4):
            arrays[f"{i}:{name}"] = px[..., c]
    np.savez(out, **arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main())
