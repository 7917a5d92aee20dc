"""OpenEXR output: one file per frame, written in a private temporary folder beside it, then renamed into place.

A crash, a cancel or a full disk never leaves a partial file under the final name.
"""

from __future__ import annotations

import numpy as np

from engine.errors import EngineError
from engine.io import atomic
from engine.outputs import PARTIAL_SUFFIX, partial_prefix


def write_exr(path: str, rgba: np.ndarray, layers: dict[str, np.ndarray], *, interop_id: str,
              attributes: dict[str, str], half: bool = True, compression: str = "zip", shown: str | None = None
              ) -> None:
    """Write R, G, B, A then each ``<Layer>.A`` matte; string attributes become header metadata. ``shown``: the
    file's name in messages when ``path`` goes through a pinned folder (engine.io.pinned_dir)."""
    import OpenImageIO as oiio

    h, w = rgba.shape[:2]
    names = ["R", "G", "B", "A"] + [f"{name}.A" for name in layers]
    # Packed in the file's own type: numpy's float32 -> half rounding is OpenEXR's (nearest even, the same bits,
    # NaN and infinities included), and OIIO then skips a conversion pass of its own (0.32 -> 0.23 CPU-s a frame
    # for 14 channels at 1080p, bench/RESULTS.md).
    # Mattes are zero outside their faces: only each one's non-zero box is packed (interleaving ten full-frame
    # planes was 0.1 CPU-s of a 1080p frame, bench/RESULTS.md part 8).
    data = np.zeros((h, w, len(names)), dtype=np.float16 if half else np.float32)
    data[..., :4] = rgba
    for i, plane in enumerate(layers.values()):
        box = nonzero_box(plane)
        if box is not None:
            data[box + (4 + i,)] = plane[box]
    spec = oiio.ImageSpec(w, h, len(names), oiio.HALF if half else oiio.FLOAT)
    spec.channelnames = tuple(names)
    spec.alpha_channel = 3
    spec.attribute("compression", compression)
    spec.attribute("oiio:ColorSpace", interop_id)
    spec.attribute("colorInteropID", interop_id)
    for key, value in attributes.items():
        spec.attribute(key, str(value))

    # Written by name inside a private 0700 folder beside the frame, then renamed over it: a link planted at any
    # temporary or final name is never followed (engine.io.atomic). Host and pid in the folder's name: a later run
    # can sweep what a killed writer left (outputs.sweep_partials).
    with atomic.private_path(path, prefix=partial_prefix(path), suffix=PARTIAL_SUFFIX) as tmp:
        out = oiio.ImageOutput.create(tmp)
        if out is None or not out.open(tmp, spec):
            raise EngineError(f"cannot write '{shown or path}' ({oiio.geterror().strip() or 'open failed'})",
                              "check that the output folder is writable and the disk is not full")
        ok = out.write_image(data)
        err = out.geterror()
        ok = out.close() and ok
        if not ok:
            raise EngineError(f"writing '{shown or path}' failed ({err.strip()})", "check free disk space")


def nonzero_box(plane: np.ndarray) -> tuple[slice, slice] | None:
    """The smallest (rows, cols) box holding every pixel of ``plane`` whose bits are not +0.0 (-0.0 and NaN
    count), None when there is none; a plane other than float32 gives the whole frame."""
    if plane.dtype != np.float32:
        return np.s_[:, :]
    bits = np.ascontiguousarray(plane).view(np.uint32)
    rows = np.flatnonzero(bits.max(axis=1))
    if not rows.size:
        return None
    r0, r1 = int(rows[0]), int(rows[-1]) + 1
    cols = np.flatnonzero(bits[r0:r1].max(axis=0))
    return np.s_[r0:r1, int(cols[0]):int(cols[-1]) + 1]


def read_exr(path: str) -> tuple[np.ndarray, list[str], dict[str, str]]:
    """(float32 H x W x C pixels, channel names, string attributes) — for tests and tools."""
    import OpenImageIO as oiio

    inp = None
    try:
        inp = oiio.ImageInput.open(path)
        if inp is None:
            raise EngineError(f"cannot read '{path}' ({oiio.geterror().strip()})", "check the file")
        spec = inp.spec()
        px = np.asarray(inp.read_image(0, 0, 0, spec.nchannels, oiio.FLOAT), np.float32)
        attrs = {a.name: a.value for a in spec.extra_attribs if isinstance(a.value, str)}
        return px.reshape(spec.height, spec.width, spec.nchannels), list(spec.channelnames), attrs
    except UnicodeDecodeError as e:  # a damaged header's bytes: in OpenImageIO's error, channel names, attributes
        raise EngineError(f"cannot read '{path}': its header is damaged ({e.reason})", "re-render the frame") from e
    finally:
        if inp is not None:
            inp.close()
