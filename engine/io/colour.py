"""Colour conversions: the plate's space <-> scene-linear Rec.709 working space <-> piecewise sRGB for models.

Built in: linear Rec.709 (Blender's scene_linear), sRGB, ACEScg, ACES2065-1, raw. Any other name is looked up
in an OCIO config (the one Blender passes, or $OCIO) when PyOpenColorIO is installed.
"""

from __future__ import annotations

import os

import numpy as np

from engine.errors import EngineError

LINEAR_NAMES = {"linear", "linear rec.709", "lin_rec709_scene", "scene_linear", "linear rec.709 (srgb)",
                "linear srgb", "lin_srgb", "utility - linear - srgb"}
SRGB_NAMES = {"srgb", "srgb_rec709_scene", "srgb - texture", "srgb_tx", "utility - srgb - texture",
              "srgb_texture"}
ACESCG_NAMES = {"acescg", "lin_ap1_scene", "aces - acescg"}
ACES2065_NAMES = {"aces2065-1", "lin_ap0_scene", "aces - aces2065-1", "aces_interchange"}
RAW_NAMES = {"raw", "non-color", "data"}

# Rec.709 luminance weights of scene-linear RGB (the working space), as float32 for `rgb @ REC709_LUMA`
REC709_LUMA = np.array([0.2126, 0.7152, 0.0722], np.float32)

# Rec.709 primaries, D65 <-> ACES AP1 / AP0 (Bradford-adapted), row-major, applied as rgb @ M.T
_AP1_TO_709 = np.array([
    [1.70505099, -0.62179212, -0.08325887],
    [-0.13025642, 1.14080474, -0.01054832],
    [-0.02400336, -0.12896898, 1.15297234],
], dtype=np.float64)
_AP0_TO_709 = np.array([
    [2.52168619, -1.13413099, -0.38755520],
    [-0.27647991, 1.37271909, -0.09623917],
    [-0.01537806, -0.15297534, 1.16835340],
], dtype=np.float64)



def srgb_encode(lin: np.ndarray) -> np.ndarray:
    """Scene-linear -> piecewise sRGB (IEC 61966-2-1), linear toe continued below 0."""
    x = np.asarray(lin, dtype=np.float32)
    out = np.maximum(x, np.float32(0.0031308), out=np.empty(x.shape, np.float32))  # in place, as srgb_decode
    np.power(out, np.float32(1.0 / 2.4), out=out)
    out *= np.float32(1.055)
    out -= np.float32(0.055)
    np.multiply(x, np.float32(12.92), out=out, where=x <= np.float32(0.0031308))
    return out


def srgb_decode(enc: np.ndarray) -> np.ndarray:
    x = np.asarray(enc, dtype=np.float32)
    # in place from here: a crop's temporaries were a third of the cost
    out = np.maximum(x, np.float32(0.04045), out=np.empty(x.shape, np.float32))
    out += np.float32(0.055)
    out /= np.float32(1.055)
    np.power(out, np.float32(2.4), out=out)
    np.divide(x, np.float32(12.92), out=out, where=x <= np.float32(0.04045))
    return out


# 8-bit sRGB code value -> linear, the same float32 values as srgb_decode(u8 / 255) (np.power on a 1080p frame:
# 97 ms; this table: 11 ms).
SRGB_U8_TO_LINEAR = srgb_decode(np.arange(256, dtype=np.float32) / 255.0)


def canonical(name: str) -> str:
    """Map a colour-space name to one of: linear, srgb, acescg, aces2065, raw, or 'ocio:<name>'."""
    n = name.strip().lower()
    if n in LINEAR_NAMES:
        return "linear"
    if n in SRGB_NAMES:
        return "srgb"
    if n in ACESCG_NAMES:
        return "acescg"
    if n in ACES2065_NAMES:
        return "aces2065"
    if n in RAW_NAMES:
        return "raw"
    return "ocio:" + name.strip()


def resolve(name: str, *, is_float_file: bool) -> str:
    """The canonical space of an input, 'auto' meaning: float (EXR) files are linear, integer files sRGB."""
    if name.strip().lower() in ("", "auto"):
        return "linear" if is_float_file else "srgb"
    space = canonical(name)
    if space.startswith("ocio:"):
        _ocio_processor(space[5:], to_linear=True)  # fail early with a clear message
    return space


GAMUT_INTEROP = {"rec709": "lin_rec709_scene", "ap1": "lin_ap1_scene", "ap0": "lin_ap0_scene"}
_TO_709 = {"ap1": _AP1_TO_709, "ap0": _AP0_TO_709}


def decode_plate(rgb: np.ndarray, space: str) -> tuple[np.ndarray, str]:
    """Plate pixels in ``space`` -> (scene-linear pixels, their gamut). ACES plates stay in their own gamut so
    the composite and the EXR are in the plate's linear space; only model inputs are taken to Rec.709."""
    rgb = np.asarray(rgb, dtype=np.float32)
    if space in ("linear", "raw"):
        return rgb, "rec709"
    if space == "srgb":
        return srgb_decode(rgb), "rec709"
    if space == "acescg":
        return rgb, "ap1"
    if space == "aces2065":
        return rgb, "ap0"
    if space.startswith("ocio:"):
        out = np.ascontiguousarray(rgb, dtype=np.float32).copy()
        _ocio_processor(space[5:], to_linear=True).applyRGB(out)
        return out, "rec709"
    raise EngineError(f"unknown colour space '{space}'", "use linear, sRGB, ACEScg or a name from your OCIO config")


def to_rec709(lin: np.ndarray, gamut: str) -> np.ndarray:
    if gamut == "rec709":
        return lin
    return (lin.astype(np.float64) @ _TO_709[gamut].T).astype(np.float32)


def from_rec709(lin: np.ndarray, gamut: str) -> np.ndarray:
    if gamut == "rec709":
        return lin
    return (lin.astype(np.float64) @ np.linalg.inv(_TO_709[gamut]).T).astype(np.float32)


def to_u8(srgb: np.ndarray) -> np.ndarray:
    """Encoded [0, 1] -> 8-bit, rounded (what 8-bit detectors see)."""
    return (np.clip(srgb, 0, 1) * 255.0 + 0.5).astype(np.uint8)


def linear_to_model(lin: np.ndarray, gamut: str) -> np.ndarray:
    """Working linear -> what models see: piecewise sRGB in [0, 1] (never a view transform)."""
    return np.clip(srgb_encode(to_rec709(lin, gamut)), 0.0, 1.0)


# Names of linear Rec.709 in Blender's config, the OCIO built-in configs and older ACES configs.
_OCIO_REC709 = ("Linear Rec.709", "Linear Rec.709 (sRGB)", "lin_rec709_scene", "lin_rec709", "Utility - Linear - sRGB")


def ocio_config_path() -> str:
    """The OCIO config in use: $OCIO (the add-on passes Blender's), else OCIO's built-in default."""
    return os.environ.get("OCIO") or "ocio://default"


def _ocio_processor(name: str, *, to_linear: bool):
    try:
        import PyOpenColorIO as OCIO  # only for colour spaces beyond the built-in ones
    except ImportError as exc:
        raise EngineError(
            f"colour space '{name}' is not built in and PyOpenColorIO is not installed",
            "use linear, sRGB, ACEScg or ACES2065-1, or install opencolorio into the engine environment",
        ) from exc
    path = ocio_config_path()
    try:
        cfg = OCIO.Config.CreateFromFile(path)
    except Exception as exc:  # OCIO raises its own Exception type
        raise EngineError(f"the OCIO config '{path}' cannot be read ({exc})",
                          "point $OCIO at Blender's datafiles/colormanagement/config.ocio") from exc
    if cfg.getColorSpace(name) is None:
        raise EngineError(f"colour space '{name}' is not in the OCIO config '{path}'",
                          "check the strip's colour space or set $OCIO to Blender's config.ocio")
    linear = next((n for n in _OCIO_REC709 if cfg.getColorSpace(n) is not None), None)
    if linear is None:
        raise EngineError(f"the OCIO config '{path}' has no linear Rec.709 colour space",
                          "use a config with 'Linear Rec.709' (Blender's) or convert the plate to linear first")
    src, dst = (name, linear) if to_linear else (linear, name)
    return cfg.getProcessor(src, dst).getDefaultCPUProcessor()
