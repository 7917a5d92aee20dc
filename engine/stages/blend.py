"""Seamless edges: the face crop is blended into the plate crop in the gradient domain (or by bands) in float
linear light, before it is premultiplied, so the face layer stays an ordinary premultiplied layer.

The result ``B`` of a blend is a new face crop: ``layer = B * a`` and ``composite = layer + plate * (1 - a)`` with
the same matte ``a`` as before, so Alpha Over of the layer on the plate is the composite exactly, and where
``a`` is 0 the plate is untouched (B is never looked at there).

- poisson: B has the face's gradients of log intensity inside the matte's support and meets the plate on its
  border (Pérez et al. 2003, in the log domain): ``B = face * exp(M)`` where the membrane M is harmonic inside
  the support and equals ``log(plate / face)`` on its border. The correction is a smooth gain, so it never drives
  a dark lip or a saturated channel below zero (an additive membrane in linear light does) and highlights above
  1.0 pass unchanged. Border values far from the region's median ratio (hair beside the temples, a dark
  collar under the jaw) are replaced by their neighbours' before the solve, so the plate's non-skin does not
  bleed into the face.
  M is smooth, so it is solved with a sparse direct solve on a grid of at most ``max_side`` pixels.
- multiband: Laplacian-pyramid blend of face and plate under the matte (Burt and Adelson 1983): low
  frequencies are mixed over a wide band, fine ones over a narrow one.
"""

from __future__ import annotations

import cv2
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import spsolve

from engine.stages import blur, geometry68

MODES = ("poisson", "multiband", "none")
_FLOOR = 1e-4  # linear floor before logs: below any real pixel, above float noise
_RING_TOLERANCE = 0.2  # log units, worst channel: a border pixel this far from the region's median weighs e^-1
# The seam band after the lighting step, as a fraction of the face size: pass ``band=BAND_SCALE * face_scale``.
# The lighting step already gave the face the plate's low frequencies; a whole-matte membrane would only pull the
# plate's border into the cheeks (values: bench/QUALITY.md, 'Where the constants came from').
BAND_SCALE = 0.15
# The detail handoff (detail_handoff): over HANDOFF of the face size inside the full matte, and through the whole
# feather, the detail is the plate's, so the source's features never meet the matte's edge. Detail: log intensity
# less its Gaussian of DETAIL_SIGMA of the face size (the cheek and jaw shading the seam band does not reach), at
# most DETAIL_MAX_PX crop px (a close-up hands over its skin texture, not its jaw's shape); wider or coarser costs
# identity (values: bench/QUALITY.md, 'Where the constants came from').
HANDOFF = 0.04
DETAIL_SIGMA = 0.08
DETAIL_MAX_PX = 10.0
DETAIL_CLIP = 0.2  # log units: the largest plate detail carried (skin texture is well below; hair edges above)
# The plate's brows and eyes left out of the handoff (``carry``): grown and softened by these shares of the face,
FEATURE_GROW, FEATURE_SOFT = 0.03, 0.015
# from CARRY_FROM plate pixels inside the full matte on, over CARRY_STOP of the handoff's width: a small face's
# handoff is a few plate pixels wide and needs them all, a ghost brow shows only on a wide one
# (values: bench/QUALITY.md, 'Where the constants came from').
CARRY_FROM = 2.0
CARRY_STOP = 0.25
HANDOFF_FROM = 0.99  # the matte value where the face's own detail starts to come back
# Crop px beyond the matte's support that a blended face is read at: the log ratio's blur (sigma 1, 5 px) and the
# paste's bilinear warp (1 px), with room to spare.
READ_REACH = 8
# The matte value where the membrane's boundary lies: below it B takes the plate's level (and, with the handoff,
# its detail), so the swap's own falloff does not stay as a dark rim in the feather. 0 is off: it can turn a face
# of small identity margin to the original (values: bench/QUALITY.md, 'Where the constants came from').
LEVEL_FROM = 0.0
LEVEL_MAX_PX = 3.0  # plate px of the feather that take the plate's level on a large face (all of it cost identity)
MAX_SOLVE_SIDE = 160  # the membrane's grid: ~25k unknowns at most, a direct solve in well under a second


def blend(face: np.ndarray, plate: np.ndarray, matte: np.ndarray, mode: str = "poisson", band: float | None = None,
          max_side: int = MAX_SOLVE_SIDE, scale: float | None = None, handoff: float = HANDOFF,
          fine_gain: float = 1.0, fine_sigma: float = 1.5, plate_px: float = 1.0,
          carry: np.ndarray | None = None) -> np.ndarray:
    """The blended face crop B (H, W, 3) float32; use it in place of ``face`` under the same ``matte``.

    ``band`` (pixels, poisson only): solve only in a band this wide inside the matte's edge and keep the face
    as it is deeper in (M = 0 there). After the lighting step the face's low frequencies already are the
    plate's; a full-face membrane would then only pull the plate's border (neck shadow, hairline) into the
    cheeks. None: the classic solve over the whole matte. ``plate_px``: crop pixels per plate pixel (how far into
    a wide feather the plate's level reaches, ``LEVEL_MAX_PX``)."""
    if face.shape != plate.shape or face.ndim != 3 or matte.shape != face.shape[:2]:
        raise ValueError(f"face {face.shape}, plate {plate.shape} and matte {matte.shape} must be crops of one size "
                         "(H, W, 3) and (H, W): cut them with the same crop matrix")
    if mode not in MODES:
        raise ValueError(f"unknown blend mode '{mode}'; use one of {', '.join(MODES)}")
    if band is not None and band <= 0:
        raise ValueError(f"blend band {band} must be a positive width in pixels (or None for the whole matte)")
    face = face.astype(np.float32)  # a copy: the result is made in it
    plate = np.asarray(plate, np.float32)
    region = matte > 0
    if mode == "none" or not region.any():
        return face
    if mode == "multiband":
        return multiband(face, plate, matte)
    if handoff > 0:
        size = scale or matte_scale(matte)
        face = detail_handoff(face, plate, matte, handoff * size,
                              min(DETAIL_SIGMA * size, DETAIL_MAX_PX), fine_gain, fine_sigma, carry,
                              CARRY_FROM * plate_px)
    if LEVEL_FROM > 0:
        # The face takes the plate's level through the feather too: the solve's boundary is where the matte
        # reaches LEVEL_FROM, and below it B is the plate (its detail came with the handoff). With the boundary
        # at the matte's outer tail, the swap's own falloff at its edge (a jaw shadow, a darker temple, under the
        # plate after the lighting step) stayed as a dark rim inside the feather.
        # On a large face the feather is many plate pixels wide: there only its outer LEVEL_MAX_PX plate pixels
        # take the plate's level (the whole feather showed the target's own shading at the jaw and cost identity).
        rbox = blur.weight_box(region, 0)  # its ring of zeros holds every pixel's nearest zero: the same depths
        deep = np.zeros_like(region)
        deep[rbox] = cv2.distanceTransform(np.pad(region[rbox].astype(np.uint8), 1), cv2.DIST_L2,
                                           cv2.DIST_MASK_PRECISE)[1:-1, 1:-1] > LEVEL_MAX_PX * plate_px
        region = (matte >= LEVEL_FROM) | deep
        if not region.any():
            return face * np.exp(log_ratio(plate, face, matte > 0))
    diff = log_ratio(plate, face, region, matte > 0)
    box = blur.weight_box(matte > 0, READ_REACH)
    if band is not None:  # measured from the matte's outer edge, wherever the solve's boundary lies (the box's
        # margin is off the matte: the distance in it is the whole crop's)
        dist = cv2.distanceTransform(np.pad((matte[box] > 0).astype(np.uint8), 1), cv2.DIST_L2,
                                     cv2.DIST_MASK_PRECISE)
        core = np.zeros_like(region)
        core[box] = dist[1:-1, 1:-1] > band
        diff[core] = 0.0
        region = region & ~core
    # diff is 0 off the read box (log_ratio), and so is the membrane there: only the box is multiplied
    face[box] *= np.exp(membrane(diff, region, max_side)[box])
    return face


def matte_scale(matte: np.ndarray) -> float:
    """The face size a matte implies (square root of its area, like geometry68.face_scale of the outline)."""
    return float(np.sqrt(max(float(np.clip(matte, 0.0, 1.0).sum()), 1.0)))


def detail_handoff(face: np.ndarray, plate: np.ndarray, matte: np.ndarray, width: float, sigma: float,
                   fine_gain: float = 1.0, fine_sigma: float = 1.5, carry: np.ndarray | None = None,
                   carry_from: float = 0.0) -> np.ndarray:
    """The face with the plate's detail (log intensity less its Gaussian of ``sigma``) where the matte is below
    full and fading to the face's own over ``width`` pixels inside: the face's features (a brow tail, the source's
    cheek silhouette) never meet the matte's edge, and the plate's texture runs on through the feather."""
    full = (matte >= HANDOFF_FROM).astype(np.uint8)
    if width < 1 or sigma < 0.5 or not full.any():
        return face
    # Only the matte's support is read (B is never looked at where the matte is 0) and READ_REACH px beyond it (the
    # log ratio's blur, the bilinear paste): the per-pixel work is cut to that box, each blur's input to the box
    # grown by the blur's reach, so the values there are the whole crop's (a close-up's matte box is ~30 % of it).
    out_box = blur.weight_box(matte > 0, READ_REACH)
    # the box's margin is off the full matte, so the depth in it is the whole crop's
    depth = cv2.distanceTransform(np.pad(full[out_box], 1), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    t = np.clip(depth / width, 0.0, 1.0)
    w = (1.0 - t * t * (3.0 - 2.0 * t)).astype(np.float32)  # smoothstep: no kink where it ends
    if carry is not None:  # the plate's own features (a brow's tail at the temple) are not handed inward: its
        # detail still runs on through the feather (where the plate shows anyway) and ``carry_from`` px beyond,
        # and stops within CARRY_STOP of the handoff's width
        ramp = max(CARRY_STOP * width, 1.0)
        drop = (1.0 - np.clip(carry[out_box], 0.0, 1.0)) * np.clip((depth - carry_from) / ramp, 0.0, 1.0)
        w = w * (1.0 - drop)
    fine = fine_gain != 1.0
    dp_box = blur.grow_box(out_box, blur.kernel_reach(max(fine_sigma, 0.5)) if fine else 0, matte.shape)
    log_box = blur.grow_box(dp_box, blur.kernel_reach(sigma), matte.shape)
    # blur at 4 sigma of r = blur_sigma(lp - lf) is blur_(sqrt(17) sigma)(lp - lf): one wide blur of the logs'
    # difference, not a wide box of narrow blurs
    wide = float(np.sqrt(17.0)) * sigma
    ratio_box = blur.grow_box(dp_box, blur.kernel_reach(wide), matte.shape)
    # the logs once, on the widest box; the narrow blurs read their part of it
    lf_wide = np.log(np.maximum(face[ratio_box], _FLOOR))
    lp_wide = np.log(np.maximum(plate[ratio_box], _FLOOR))
    lf, lp = lf_wide[blur.inner(ratio_box, log_box)], lp_wide[blur.inner(ratio_box, log_box)]
    at = blur.inner(log_box, dp_box)
    bf, bp = blur.gaussian(lf, sigma)[at], blur.gaussian(lp, sigma)[at]
    df, dp = lf[at] - bf, lp[at] - bp
    # Where the bases differ locally (a hair fringe of the plate over the face's skin) the plate's detail is the
    # step from skin to hair, which on the face's brighter base would print a bright halo: there it is carried at
    # texture amplitude only. Where they agree (the same surface) it is carried whole.
    clipped = DETAIL_CLIP * np.tanh(dp / DETAIL_CLIP)
    r = bp - bf  # a face lit differently differs by a smooth gain: only the ratio's local departure counts
    r_wide = blur.gaussian(lp_wide - lf_wide, wide)[blur.inner(ratio_box, dp_box)]
    same = np.exp(-(((r - r_wide) / DETAIL_CLIP) ** 2))
    dp = clipped + (dp - clipped) * same
    if fine:  # the crop's cut and the paste take part of the plate's finest detail: carried raised
        dp = dp + (fine_gain - 1.0) * (dp - cv2.GaussianBlur(dp, (0, 0), max(fine_sigma, 0.5)))
    at = blur.inner(dp_box, out_box)
    out = face.astype(np.float32)  # a copy
    out[out_box] = face[out_box] * np.exp(w[..., None] * (dp[at] - df[at]))
    return out


def plate_features_out(lm68: np.ndarray, size: int, face_scale: float) -> np.ndarray:
    """``carry`` for ``blend``: 0 on the plate's brows and eyes (grown, softened), 1 elsewhere. The handoff
    carries the plate's skin texture through the feather; a brow's hair carried with it printed a second brow
    beside the swap's own (Rudd onto Whigham, the temple)."""
    features = geometry68.feature_mask(lm68, size, [geometry68.LEFT_EYE, geometry68.RIGHT_EYE, geometry68.BROWS[:5],
                                                    geometry68.BROWS[5:]], FEATURE_GROW * face_scale)
    soft = blur.on_support(features, max(FEATURE_SOFT * face_scale, 0.8))
    return (1.0 - np.clip(soft, 0.0, 1.0)).astype(np.float32, copy=False)


def premultiplied(blended: np.ndarray, matte: np.ndarray) -> np.ndarray:
    """RGBA face layer: B * a with A = a (what the EXR holds)."""
    a = np.clip(matte, 0.0, 1.0).astype(np.float32, copy=False)
    return np.concatenate([blended * a[..., None], a[..., None]], axis=-1)


def log_ratio(plate: np.ndarray, face: np.ndarray, region: np.ndarray,
              support: np.ndarray | None = None) -> np.ndarray:
    """log(plate / face) of local means (H, W, 3). On the region's border ring, values far from the region's own
    median (where plate and face show the same surface: hair or backdrop next to the matte, not skin) are
    replaced by a fill from trusted ring neighbours, or by that median where none is near. Off the ring, outside
    the region (the feather, with a boundary at LEVEL_FROM) the fill too: a smooth level, not the plate itself.
    Computed on the box of ``support`` (the matte's, default the region) grown by READ_REACH, what a blend reads;
    0 beyond it."""
    out = np.zeros(plate.shape, np.float32)
    box = blur.weight_box(region if support is None else support | region, READ_REACH)
    if box[0].stop <= box[0].start:
        return out
    cut = blur.grow_box(box, blur.kernel_reach(1.0), region.shape)
    at = blur.inner(cut, box)
    lp = np.log(np.maximum(cv2.GaussianBlur(plate[cut], (0, 0), 1.0)[at], _FLOOR))
    lf = np.log(np.maximum(cv2.GaussianBlur(face[cut], (0, 0), 1.0)[at], _FLOOR))
    lr = (lp - lf).astype(np.float32, copy=False)
    region = region[box]
    r8 = region.astype(np.uint8)
    ring = (cv2.dilate(r8, np.ones((3, 3), np.uint8)) > 0) & ~region
    if ring.sum() < 8:
        out[box] = lr
        return out
    ref = np.median(lr[region], 0).astype(np.float32)
    dev = np.abs(lr - ref).max(-1)  # any channel: a blue shirt or red hair is as foreign as a dark one
    trust = (np.exp(-((dev / _RING_TOLERANCE) ** 2)) * ring).astype(np.float32, copy=False)
    sigma = max(1.0, 0.05 * np.sqrt(region.sum()))
    prior = 0.02  # the weight of the region's median in the fill: it wins where no trusted neighbour is near
    # the fill's blurs read the ring's neighbourhood: trust is 0 off the ring, so the box grown by their reach
    # (zeros beyond the box) holds what the whole crop holds there
    wide = blur.grow_box(box, blur.kernel_reach(sigma), out.shape[:2])
    at = blur.inner(wide, box)
    spread = np.zeros((wide[0].stop - wide[0].start, wide[1].stop - wide[1].start, 4), np.float32)
    spread[at][..., :3] = lr * trust[..., None]
    spread[at][..., 3] = trust
    spread = blur.gaussian(spread, sigma)[at]
    num = spread[..., :3] + prior * ref
    den = spread[..., 3:] + prior
    t = trust[..., None]
    out[box] = lr * t + num / den * (1.0 - t)
    return out


def membrane(diff: np.ndarray, region: np.ndarray, max_side: int = MAX_SOLVE_SIDE) -> np.ndarray:
    """Harmonic M (H, W, C) inside ``region`` with M = ``diff`` on the pixels just outside it; ``diff`` outside.

    Pixels of the region on the crop's own border have no outside neighbour there (zero-flux edge)."""
    h, w = region.shape
    ys, xs = np.nonzero(region)
    if len(ys) == 0:
        return diff.copy()
    # Solve on the region's bounding box grown by one pixel (its border ring), shrunk to at most max_side.
    y0, y1 = max(ys.min() - 2, 0), min(ys.max() + 3, h)
    x0, x1 = max(xs.min() - 2, 0), min(xs.max() + 3, w)
    sub_d, sub_r = diff[y0:y1, x0:x1], region[y0:y1, x0:x1]
    bh, bw = sub_r.shape
    f = max(1.0, max(bh, bw) / max_side)
    if f > 1.0:
        sh, sw = max(3, int(round(bh / f))), max(3, int(round(bw / f)))
        # A coarse pixel is unknown only if it is all region; the others are boundary values, area-averaged
        # over their non-region part only (the raw ratio inside the region is not a boundary value).
        outside = (~sub_r).astype(np.float32)
        num = cv2.resize(sub_d * outside[..., None] if sub_d.ndim == 3 else sub_d * outside, (sw, sh),
                         interpolation=cv2.INTER_AREA).reshape(sh, sw, -1)
        share = cv2.resize(outside, (sw, sh), interpolation=cv2.INTER_AREA)
        small_d = num / np.maximum(share, 1e-6)[..., None]
        small_r = share < 1e-3
        m_small = _solve(small_d, small_r)
        m = cv2.resize(m_small, (bw, bh), interpolation=cv2.INTER_LINEAR).reshape(bh, bw, -1)
    else:
        m = _solve(sub_d.reshape(bh, bw, -1), sub_r)
    out = diff.reshape(h, w, -1).copy()
    box = out[y0:y1, x0:x1]
    box[sub_r] = m[sub_r]
    return out.reshape(diff.shape)


def _solve(d: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Discrete Laplace equation on the unknowns ``r`` with Dirichlet values ``d`` at their outside neighbours."""
    h, w, c = d.shape
    idx = -np.ones((h, w), np.int64)
    ys, xs = np.nonzero(r)
    n = len(ys)
    out = d.astype(np.float64).copy()
    if n == 0:
        return out.astype(np.float32, copy=False)
    idx[ys, xs] = np.arange(n)
    rows, cols, vals = [np.arange(n)], [np.arange(n)], [np.zeros(n)]
    rhs = np.zeros((n, c))
    diag = np.zeros(n)
    for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        ny, nx = ys + dy, xs + dx
        ok = (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)  # off-crop neighbours: no flux
        diag += ok
        nyo, nxo = ny[ok], nx[ok]
        j = idx[nyo, nxo]
        inner = j >= 0
        src = np.nonzero(ok)[0]
        rows.append(src[inner])
        cols.append(j[inner])
        vals.append(-np.ones(int(inner.sum())))
        np.add.at(rhs, src[~inner], d[nyo[~inner], nxo[~inner]])
    vals[0] = diag
    a = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)).tocsc()
    sol = spsolve(a, rhs)
    out[ys, xs] = sol.reshape(n, c)
    return out.astype(np.float32, copy=False)


def multiband(face: np.ndarray, plate: np.ndarray, matte: np.ndarray, levels: int = 5) -> np.ndarray:
    """Laplacian-pyramid blend with the matte's Gaussian pyramid as the per-level weights."""
    h, w = matte.shape
    levels = max(1, min(levels, int(np.log2(max(min(h, w), 2))) - 2))
    a = np.clip(matte, 0.0, 1.0).astype(np.float32, copy=False)
    ga, gf, gp = [a], [face], [plate]
    for _ in range(levels):
        ga.append(cv2.pyrDown(ga[-1]))
        gf.append(cv2.pyrDown(gf[-1]))
        gp.append(cv2.pyrDown(gp[-1]))
    out = gf[-1] * ga[-1][..., None] + gp[-1] * (1.0 - ga[-1][..., None])
    for k in range(levels - 1, -1, -1):
        size = (gf[k].shape[1], gf[k].shape[0])
        lf = gf[k] - cv2.pyrUp(gf[k + 1], dstsize=size)
        lp = gp[k] - cv2.pyrUp(gp[k + 1], dstsize=size)
        wk = ga[k][..., None]
        out = cv2.pyrUp(out, dstsize=size) + lf * wk + lp * (1.0 - wk)
    return out.astype(np.float32, copy=False)
