"""The face's symmetry and eye openings in crop space, what ``engine.stages.lighting.relight`` is given: each pixel's
mirror partner across the face's midline, how squarely the face looks at the camera, and where its eyes are open
(the swap keeps its own colour there)."""

from __future__ import annotations

import numpy as np

from engine.stages import blur, geometry68

# ``facing``'s ramp: the nose-to-jaw ratio of a turned face and of a frontal one (values: bench/QUALITY.md, 'Where
# the constants came from').
FACING_FROM, FACING_TO = 0.4, 0.8

# iBUG 68 points and the 10 forehead points, each with its mirror partner across the face's midline.
MIRROR78 = np.array(list(range(16, -1, -1)) + list(range(26, 16, -1)) + [27, 28, 29, 30, 35, 34, 33, 32, 31]
                    + [45, 44, 43, 42, 47, 46, 39, 38, 37, 36, 41, 40]
                    + [54, 53, 52, 51, 50, 49, 48, 59, 58, 57, 56, 55] + [64, 63, 62, 61, 60, 67, 66, 65]
                    + list(range(77, 67, -1)))


def mirror_maps(lm68: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(map_x, map_y) for cv2.remap: each pixel of the face mesh to its mirror partner across the face's midline
    (piecewise affine between the 78 points and their mirror partners, so a turned face maps its near cheek to
    its far one); pixels outside the mesh map to themselves."""
    from engine.stages.swap_geometric import piecewise_affine_maps  # the swapper's own warp

    pts = geometry68.with_forehead(np.asarray(lm68, np.float64))
    map_x, map_y, _ = piecewise_affine_maps(pts[MIRROR78], pts, geometry68.triangulate(pts), size)
    return map_x, map_y


def facing(lm68: np.ndarray) -> float:
    """How squarely the face looks at the camera, 0 (turned, one cheek foreshortened: the nose tip's distance to
    one side of the jaw under 0.4 of its distance to the other) to 1 (frontal: over 0.8)."""
    lm = np.asarray(lm68, np.float64)
    near, far = sorted((float(np.linalg.norm(lm[30] - lm[2])), float(np.linalg.norm(lm[30] - lm[14]))))
    return float(np.clip((near / max(far, 1e-6) - FACING_FROM) / (FACING_TO - FACING_FROM), 0.0, 1.0))


def eye_openings(lm68: np.ndarray, size: int, face_scale: float) -> np.ndarray:
    """(size, size) in [0, 1]: the eyes between the lids (sclera and iris), where ``lighting.relight`` keeps the
    swap's own colour. At lighting.CHROMA_DETAIL the skin's colour filled across them turned a white eye the skin's
    hue: Rudd's eyes onto Whigham came out amber, whites and irises alike."""
    lm = np.asarray(lm68, np.float64)
    mask = geometry68.feature_mask(lm, size, [geometry68.LEFT_EYE, geometry68.RIGHT_EYE], 0.0)
    return np.clip(blur.on_support(mask, max(0.01 * face_scale, 0.7)), 0.0, 1.0).astype(np.float32, copy=False)
