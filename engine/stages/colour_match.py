"""Colour match of the swapped face to the plate's face, in linear light, from statistics inside the skin matte.

- gain: per-channel gain from the difference of mean log values — exactly multiplicative, i.e. a change of
  exposure and white balance, the physically plausible difference between two lit faces.
- reinhard: mean/std match per channel in CIE Lab computed from linear Rec.709 (Reinhard et al. 2001).
The resulting parameters are plain numbers, so a track can smooth them over time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EPS = 1e-4
_RGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                        [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])
_XYZ_TO_RGB = np.linalg.inv(_RGB_TO_XYZ)
_WHITE = _RGB_TO_XYZ.sum(1)


def lin_to_lab(rgb: np.ndarray) -> np.ndarray:
    """CIE Lab (D65) of linear Rec.709. Float32 pixels are converted in float32 (a 1000 px crop in a quarter of
    the time, within 1e-4 of Lab's units); anything else in float64, as the quality figures want."""
    rgb = np.asarray(rgb)
    dtype = np.float32 if rgb.dtype == np.float32 else np.float64
    xyz = np.maximum(rgb, 0.0).astype(dtype, copy=False) @ (_RGB_TO_XYZ / _WHITE[:, None]).T.astype(dtype)
    f = np.cbrt(xyz)
    low = xyz <= 0.008856
    if low.any():
        f[low] = 7.787 * xyz[low] + 16.0 / 116.0
    return np.stack([116.0 * f[..., 1] - 16.0, 500.0 * (f[..., 0] - f[..., 1]), 200.0 * (f[..., 1] - f[..., 2])],
                    axis=-1)


def lab_to_lin(lab: np.ndarray) -> np.ndarray:
    fy = (lab[..., 0] + 16.0) / 116.0
    fx = fy + lab[..., 1] / 500.0
    fz = fy - lab[..., 2] / 200.0
    f = np.stack([fx, fy, fz], axis=-1)
    xyz = np.where(f > 0.206893, f**3, (f - 16.0 / 116.0) / 7.787) * _WHITE
    return (xyz @ _XYZ_TO_RGB.T).astype(np.float32)


@dataclass
class ColourParams:
    gain: np.ndarray  # (3,) multiplicative, applied first
    lab_src_mean: np.ndarray  # (3,) statistics of the gained swap, and of the target, in Lab
    lab_src_std: np.ndarray
    lab_dst_mean: np.ndarray
    lab_dst_std: np.ndarray



@dataclass
class SkinStats:
    """Statistics of a face's skin in linear light: what the match aims for. Plain numbers, so a track can
    average them over neighbouring frames (no flicker) before the parameters are derived."""

    mean_log: np.ndarray  # (3,)
    lab_mean: np.ndarray  # (3,)
    lab_std: np.ndarray  # (3,)

    @staticmethod
    def mean(stats: list[SkinStats]) -> SkinStats:
        return SkinStats(*(np.mean([getattr(x, k) for x in stats], axis=0) for k in ("mean_log", "lab_mean",
                                                                                       "lab_std")))


def skin_stats(lin: np.ndarray, skin: np.ndarray) -> SkinStats | None:
    """None when the skin area is too small to measure."""
    sel = skin > 0.5
    if sel.sum() < 50:
        return None
    px = lin[sel].astype(np.float64)
    lab = lin_to_lab(px)
    return SkinStats(np.log(np.maximum(px, _EPS)).mean(0), lab.mean(0), lab.std(0) + 1e-6)


def estimate_to(swapped_lin: np.ndarray, skin: np.ndarray, target: SkinStats, mode: str) -> ColourParams | None:
    """Parameters that take the swap's skin statistics to ``target``'s. None when the skin area is too small."""
    sel = skin > 0.5
    if sel.sum() < 50:
        return None
    s = swapped_lin[sel].astype(np.float64)
    gain = np.ones(3)
    if mode in ("gain", "gain_reinhard"):
        gain = np.clip(np.exp(target.mean_log - np.log(np.maximum(s, _EPS)).mean(0)), 1 / 16, 16)
    if mode in ("reinhard", "gain_reinhard"):
        ls = lin_to_lab(s * gain)
        return ColourParams(gain, ls.mean(0), ls.std(0) + 1e-6, target.lab_mean, target.lab_std)
    zeros, ones = np.zeros(3), np.ones(3)
    return ColourParams(gain, zeros, ones, zeros, ones)


def apply(swapped_lin: np.ndarray, p: ColourParams, mode: str, strength: float) -> np.ndarray:
    out = swapped_lin.astype(np.float64) * p.gain
    if mode in ("reinhard", "gain_reinhard"):
        lab = lin_to_lab(out)
        ratio = np.clip(p.lab_dst_std / p.lab_src_std, 0.6, 1.6)  # strong contrast changes look painted
        lab = (lab - p.lab_src_mean) * ratio + p.lab_dst_mean
        out = lab_to_lin(lab).astype(np.float64)
    res = swapped_lin + (out - swapped_lin) * strength
    return np.maximum(res, 0.0).astype(np.float32)  # Lab round trips can dip below black
