"""Write RGBA-only copies of the engine's EXRs, for Blender versions that cannot read its matte layers.

Blender 4.2's image loader refuses single-part EXRs whose extra channels are named ``<Layer>.A`` (it treats
them as a multilayer file it cannot parse), so its Sequencer and Compositor would show nothing. This script
runs with the *engine's* Python (which has OpenImageIO; Blender's has not):

    <engine python> rgba_copy.py SRC_DIR DST_DIR FRAME...

File names come from ``engine/outputs.py`` (stdlib only), found beside this script's folder: the extension
root (or the checkout) holds both ``addon/`` and ``engine/``.

Each copy holds R, G, B, A (premultiplied, the engine file's pixel type), the same colour space tags, and is written
atomically (temp file, then rename), so a reader never sees half a file.
"""

from __future__ import annotations

import os
import sys
import tempfile

import OpenImageIO as oiio

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from engine.outputs import PARTIAL_SUFFIX, output_name, partial_prefix  # noqa: E402 (needs the path above)


def copy_frame(src: str, dst: str) -> None:
    buf = oiio.ImageBuf(src)
    spec = buf.spec()
    # Same pixel type as the engine wrote (float composites of float plates stay float: untouched bits survive).
    fmt = oiio.FLOAT if spec.format == oiio.FLOAT else oiio.HALF
    pixels = buf.get_pixels(fmt)
    if pixels is None:
        raise SystemExit(f"cannot read {src}: {buf.geterror()}")
    pixels = pixels.reshape(spec.height, spec.width, spec.nchannels)[..., :4].copy()
    out_spec = oiio.ImageSpec(spec.width, spec.height, 4, fmt)
    out_spec.channelnames = ("R", "G", "B", "A")
    out_spec.alpha_channel = 3
    out_spec.attribute("compression", "zip")
    for name in ("oiio:ColorSpace", "colorInteropID"):
        value = spec.get_string_attribute(name)
        if value:
            out_spec.attribute(name, value)
    # Host and pid in the name, as the engine's own writes: a killed copy's leftovers can be swept.
    fd, tmp = tempfile.mkstemp(prefix=partial_prefix(dst), suffix=PARTIAL_SUFFIX, dir=os.path.dirname(dst))
    os.close(fd)
    try:
        out = oiio.ImageOutput.create(tmp)
        if out is None or not out.open(tmp, out_spec) or not out.write_image(pixels) or not out.close():
            raise SystemExit(f"cannot write {dst}: {oiio.geterror()}")
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv: list[str]) -> int:
    src_dir, dst_dir, frames = argv[0], argv[1], [int(f) for f in argv[2:]]
    os.makedirs(dst_dir, exist_ok=True)
    for frame in frames:
        name = output_name(frame)
        copy_frame(os.path.join(src_dir, name), os.path.join(dst_dir, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
