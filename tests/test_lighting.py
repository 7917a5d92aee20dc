"""Lighting from the plate, detail from the swap (engine/stages/lighting.py), on real faces and constructed cases.

Faces come from real photos through dlib's HOG detector and 68-point predictor (the embedded default's models);
the "swap" is the source face warped onto the target's 78 points, the target outside (what the geometric
swapper does). The helpers here are shared by test_blend.py and test_detail_match.py.
"""

from __future__ import annotations

import functools
import os

import cv2
import numpy as np
import pytest

from engine import shots
from engine.io import colour
from engine.stages import face_symmetry, geometry68, lighting, masks
from engine.stages.align import FFHQ_TEMPLATE, crop_matrix, crop_size_for, transform_points, warp_crop
from engine.stages.colour_match import lin_to_lab
from engine.stages.contracts import kps5_from_68
from tests import shared_data

SHARED = shared_data.DATA
_LUMA = np.array([0.2126, 0.7152, 0.0722])


def load(name: str) -> np.ndarray:
    """Linear Rec.709 float32 photo: the packaged test photos by name, or a file of the shared photos."""
    if name in ("astronaut", "t1", "tom_hanks"):
        return shots.load_photo_linear(name)
    path = os.path.join(SHARED, "photos", name + ".jpg")
    if not os.path.exists(path):
        pytest.skip(f"shared photo {name} is not here")
    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    return colour.srgb_decode(bgr[..., ::-1].astype(np.float32) / 255.0)


@functools.cache
def _dlib():
    import dlib
    import face_recognition_models as frm

    return dlib.get_frontal_face_detector(), dlib.shape_predictor(frm.pose_predictor_model_location())


def landmarks(lin: np.ndarray, upsample: int = 1) -> list[np.ndarray]:
    """68 landmarks of every face, largest first."""
    det, sp = _dlib()
    u8 = (colour.linear_to_model(lin, "rec709") * 255.0 + 0.5).astype(np.uint8)
    faces = [np.array([[p.x, p.y] for p in sp(u8, r).parts()], np.float64) for r in det(u8, upsample)]
    return sorted(faces, key=lambda lm: -np.ptp(lm[:, 0]))


def face_crop(lin: np.ndarray, lm68: np.ndarray, size: int | None = None) -> dict:
    """The pipeline's per-face data: crop, crop matrix, landmarks and mattes in crop space."""
    size = size or crop_size_for(float(np.ptp(lm68[:, 0])))
    m = crop_matrix(kps5_from_68(lm68), FFHQ_TEMPLATE, size)
    lm = transform_points(m, lm68)
    pts = geometry68.with_forehead(lm)
    return {"lin": warp_crop(lin, m, size), "m": m, "lm": lm, "pts": pts, "size": size,
            "scale": geometry68.face_scale(pts), "skin": masks.skin_matte(pts, lm, size),
            "matte": masks.face_matte(pts, size, 0.02, 0.08),
            "plate_px": float(np.sqrt(abs(np.linalg.det(m[:, :2]))))}


def swap(src_lin: np.ndarray, src_lm: np.ndarray, target: dict) -> np.ndarray:
    """The source face warped onto the target crop's 78 points (piecewise affine over the source's Delaunay
    triangles, as the geometric swapper does), the target outside."""
    s = face_crop(src_lin, src_lm, target["size"])
    size = target["size"]
    index = np.full((size, size), -1, np.int32)
    tris = geometry68.triangulate(s["pts"])
    mats = np.zeros((len(tris), 2, 3))
    for t, tri in enumerate(tris):
        d, src = target["pts"][tri].astype(np.float32), s["pts"][tri].astype(np.float32)
        e1, e2 = d[1] - d[0], d[2] - d[0]
        if abs(e1[0] * e2[1] - e1[1] * e2[0]) < 1e-3:
            continue  # flat in this pose: its neighbours cover it
        mats[t] = cv2.getAffineTransform(d, src)
        cv2.fillConvexPoly(index, np.round(d).astype(np.int32), t)
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64)
    m = mats[np.maximum(index, 0)]
    map_x = (m[..., 0, 0] * xs + m[..., 0, 1] * ys + m[..., 0, 2]).astype(np.float32)
    map_y = (m[..., 1, 0] * xs + m[..., 1, 1] * ys + m[..., 1, 2]).astype(np.float32)
    warped = cv2.remap(s["lin"], map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return np.where((index >= 0)[..., None], warped, target["lin"]).astype(np.float32)


@functools.cache
def pair(src: str, tgt: str, tgt_index: int = 0) -> tuple[np.ndarray, dict]:
    """(swapped crop, target face data) for a source photo onto a face of a target photo."""
    s = load(src)
    t = load(tgt)
    tgt_faces = landmarks(t)
    return swap(s, landmarks(s, 0)[0], face_crop(t, tgt_faces[tgt_index])), face_crop(t, tgt_faces[tgt_index])


def cheek_patches(lm68: np.ndarray, size: int) -> list[np.ndarray]:
    """Two cheek patches from landmarks (between the jaw, the nose wing and the lower eyelid)."""
    groups = ([1, 2, 3, 31, 40, 41], [15, 14, 13, 35, 47, 46])
    return [geometry68.feature_mask(lm68, size, [g], 0) > 0.5 for g in groups]


def cheek_delta_e(a: np.ndarray, b: np.ndarray, lm68: np.ndarray) -> float:
    """CIE76 dE between the mean colours of the two cheek patches of ``a`` and ``b`` (clipped to [0, 1])."""
    des = []
    for p in cheek_patches(lm68, a.shape[0]):
        la = lin_to_lab(np.clip(a[p].mean(0), 0, 1))
        lb = lin_to_lab(np.clip(b[p].mean(0), 0, 1))
        des.append(float(np.linalg.norm(la - lb)))
    return float(np.mean(des))


def over(face: np.ndarray, c: dict) -> np.ndarray:
    a = c["matte"][..., None]
    return face * a + c["lin"] * (1.0 - a)


def test_a_left_right_lighting_gradient_of_the_plate_is_kept_on_a_flat_lit_source():
    swapped, c = pair("paul_rudd", "astronaut")
    ramp = np.linspace(0.35, 1.6, c["size"], dtype=np.float32)[None, :, None]  # strong key light from the right
    target = c["lin"] * ramp
    out = lighting.relight(swapped, target, c["skin"], c["scale"])
    left, right = cheek_patches(c["lm"], c["size"])

    def lr(img):
        y = img @ _LUMA
        return y[right].mean() / y[left].mean()

    assert lr(swapped) < 1.6  # the source is about flat
    assert lr(out) == pytest.approx(lr(target), rel=0.12)


def test_a_constant_colour_cast_of_the_plate_is_reproduced():
    swapped, c = pair("paul_rudd", "astronaut")
    cast = np.array([1.35, 1.0, 0.62], np.float32)
    plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
    tinted = lighting.relight(swapped, c["lin"] * cast, c["skin"], c["scale"])
    sel = c["skin"] > 0.5
    ratio = tinted[sel].mean(0) / plain[sel].mean(0)
    assert ratio == pytest.approx(cast, rel=0.02)


def test_a_global_colour_match_before_the_lighting_changes_nothing():
    # Why the lighting step comes after (or replaces) the statistics-based colour match: any per-channel gain
    # applied to the swap first is divided out again by the swap's own base.
    swapped, c = pair("paul_rudd", "astronaut")
    gained = swapped * np.float32([1.3, 0.9, 0.7])
    a = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
    b = lighting.relight(gained, c["lin"], c["skin"], c["scale"])
    face = c["matte"] > 0  # (the robust pass weighs by luminance, which a coloured gain nudges a little)
    assert np.allclose(a[face], b[face], rtol=0.02, atol=1e-4)


def test_relit_cheeks_match_the_plate_on_real_photos():
    # A bearded source keeps its beard (source detail) on the cheek patches: a looser bound there.
    for src, tgt, idx, bound in (("paul_rudd", "astronaut", 0, 1.0), ("paul_rudd", "multiface", 0, 1.5),
                                 ("angelina_jolie", "t1", 1, 2.0), ("shea_whigham", "t1", 0, 2.5)):
        swapped, c = pair(src, tgt, idx)
        out = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
        before = cheek_delta_e(over(swapped, c), c["lin"], c["lm"])
        after = cheek_delta_e(over(out, c), c["lin"], c["lm"])
        assert after < bound, (src, tgt, before, after)
        assert after < before / 3, (src, tgt, before, after)


def test_target_brows_eyes_and_lips_do_not_print_into_the_base():
    _, c = pair("paul_rudd", "astronaut")
    flat = np.full((c["size"], c["size"], 3), (0.30, 0.18, 0.12), np.float32)
    features = geometry68.feature_mask(c["lm"], c["size"], [geometry68.LEFT_EYE, geometry68.RIGHT_EYE,
                                                            geometry68.OUTER_MOUTH, geometry68.BROWS[:5],
                                                            geometry68.BROWS[5:]], 2)
    painted = flat * (1.0 - 0.9 * features[..., None])  # near-black brows, eyes and lips on flat skin
    # Beard shadow and a highlight inside the skin matte: left out by the robust pass.
    painted[int(c["lm"][8, 1]) - 8:int(c["lm"][8, 1]) - 2, int(c["lm"][8, 0]) - 6:int(c["lm"][8, 0]) + 6] *= 0.4
    painted[int(c["lm"][30, 1]) - 2:int(c["lm"][30, 1]) + 2, int(c["lm"][30, 0]) - 2:int(c["lm"][30, 0]) + 2] *= 5
    base = lighting.base_layer(painted, c["skin"], c["scale"])
    face = geometry68.hull_mask(c["pts"], c["size"]) > 0.5
    y = base[face] @ _LUMA
    assert y.max() / y.min() < 1.06
    assert np.allclose(base[face].mean(0), flat[0, 0], rtol=0.05)


def test_highlights_above_one_survive():
    swapped, c = pair("paul_rudd", "astronaut")
    hot = swapped.copy()
    y, x = (int(v) for v in c["lm"][30][::-1])
    hot[y - 2:y + 2, x - 2:x + 2] = 6.0
    out = lighting.relight(hot, c["lin"], c["skin"], c["scale"])
    gain = lighting.lighting_gain(swapped, c["lin"], c["skin"], c["scale"])
    # The hot spot is detail: it is scaled by the smooth gain (which it nudges a little), not clipped or flattened.
    assert out[y, x].min() > 3.0
    assert np.all((out[y, x] / 6.0 > 0.6 * gain[y, x]) & (out[y, x] / 6.0 < 1.4 * gain[y, x]))


def test_a_small_dark_face_comes_out_as_dark_and_as_saturated_as_the_plate():
    t1 = load("t1")
    lm = landmarks(t1)[0]
    scale = 40.0 / np.ptp(lm[:, 0])  # a ~40 px face in a dim, warm plate
    small = cv2.resize(t1, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) * np.float32([0.12, 0.08, 0.06])
    c = face_crop(small, lm * scale + (scale - 1) / 2)
    src = load("paul_rudd")
    swapped = swap(src, landmarks(src, 0)[0], c)
    out = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
    before = cheek_delta_e(over(swapped, c), c["lin"], c["lm"])
    assert cheek_delta_e(over(out, c), c["lin"], c["lm"]) < min(4.0, before / 2)
    sel = c["skin"] > 0.5
    lab_plate, lab_out = lin_to_lab(c["lin"][sel].mean(0)), lin_to_lab(over(out, c)[sel].mean(0))
    assert lab_out[0] == pytest.approx(lab_plate[0], abs=2.0)  # not pale
    assert np.hypot(*lab_out[1:]) > 0.85 * np.hypot(*lab_plate[1:])  # not grey


def test_a_pooled_tone_sets_level_and_colour_and_stands_in_for_an_empty_skin():
    swapped, c = pair("paul_rudd", "astronaut")
    tone = lighting.SkinTone.pooled([lighting.skin_tone(c["lin"] * k, c["skin"]) for k in (0.5, 1.0, 1.5)])
    here = lighting.skin_tone(c["lin"], c["skin"])
    assert np.allclose(tone.mean, here.mean, rtol=1e-6)
    darker = lighting.SkinTone(mean=here.mean * 0.5, pixels=here.pixels)
    out = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], tone=darker)
    ref = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
    sel = c["skin"] > 0.5
    assert np.allclose(out[sel].mean(0) / ref[sel].mean(0), 0.5, rtol=0.01)
    hidden = np.zeros_like(c["skin"])  # the face is covered in this frame: the track's tone carries it
    out = lighting.relight(swapped, c["lin"], hidden, c["scale"], skin_swapped=c["skin"], tone=here)
    assert lighting.skin_tone(out, c["skin"]).mean == pytest.approx(here.mean, rel=0.1)


def test_the_face_follows_the_plates_exposure_from_frame_to_frame_and_adds_no_pulse_of_its_own():
    swapped, c = pair("paul_rudd", "astronaut")
    sel = c["skin"] > 0.5
    exposures = [1.0, 0.8, 1.15, 0.9, 1.0]  # a flickering practical light in the plate
    ratios = []
    a = c["matte"][..., None]
    for k in exposures:
        plate = c["lin"] * np.float32(k)
        out = lighting.relight(swapped, plate, c["skin"], c["scale"]) * a + plate * (1 - a)
        ratios.append((out[sel] @ _LUMA).mean() / (plate[sel] @ _LUMA).mean())
    assert np.ptp(ratios) < 1e-4  # the composite's frame-to-frame change is the plate's


def test_strength_zero_is_the_swap_and_half_strength_is_half_the_exposure_change():
    swapped, c = pair("paul_rudd", "astronaut")
    assert np.array_equal(lighting.relight(swapped, c["lin"], c["skin"], c["scale"], strength=0.0), swapped)
    full = lighting.relight(swapped, c["lin"] * 4.0, c["skin"], c["scale"])
    half = lighting.relight(swapped, c["lin"] * 4.0, c["skin"], c["scale"], strength=0.5)
    sel = c["skin"] > 0.5
    assert np.allclose(half[sel] ** 2, full[sel] * swapped[sel], rtol=1e-3, atol=1e-7)


def test_bad_input_says_what_is_wrong():
    swapped, c = pair("paul_rudd", "astronaut")
    with pytest.raises(ValueError, match="does not match the crop"):
        lighting.relight(swapped, c["lin"], c["skin"][:-1], c["scale"])
    with pytest.raises(ValueError, match="pooled SkinTone"):
        lighting.relight(swapped, c["lin"], np.zeros_like(c["skin"]), c["scale"], skin_swapped=c["skin"])
    with pytest.raises(ValueError, match="outside"):
        lighting.relight(swapped, c["lin"], c["skin"], c["scale"], strength=1.5)
    with pytest.raises(ValueError, match="at least one"):
        lighting.SkinTone.pooled([])


def _walkers_frame(index: int) -> np.ndarray:
    import av

    path = os.path.join(SHARED, "walkers_1080p.mp4")
    if not os.path.exists(path):
        pytest.skip("the shared walkers clip is not here")
    with av.open(path) as movie:
        for i, frame in enumerate(movie.decode(video=0)):
            if i == index:
                return colour.srgb_decode(frame.to_ndarray(format="rgb24").astype(np.float32) / 255.0)
    raise AssertionError(f"the walkers clip has no frame {index}")


def test_on_real_footage_the_chain_matches_the_plate_in_colour_sharpness_and_edge():
    from engine.stages import blend, detail_match
    from tests.test_blend import edge_energy

    frame = _walkers_frame(10)
    src = load("paul_rudd")
    src_lm = landmarks(src, 0)[0]
    des, sharp, edges = [], [], []
    for lm in landmarks(frame, 1)[:3]:  # faces of 56-103 px in a soft, compressed 1080p plate
        c = face_crop(frame, lm)
        swapped = swap(src, src_lm, c)
        lit = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
        det = detail_match.match_detail(lit, c["lin"], c["skin"], c["scale"], plate_px=c["plate_px"], seed=10,
                                        matte=c["matte"])
        out = over(blend.blend(det, c["lin"], c["matte"], "poisson", band=blend.BAND_SCALE * c["scale"]), c)
        des.append((cheek_delta_e(over(swapped, c), c["lin"], c["lm"]), cheek_delta_e(out, c["lin"], c["lm"])))
        # Where the face is fully in: in the feather two unrelated textures average and lose energy whatever
        # the face's sharpness.
        core = c["skin"] * (c["matte"] >= 0.99)
        e0 = detail_match.hf_energy(c["lin"], core, c["plate_px"])
        sharp.append((detail_match.hf_energy(over(swapped, c), core, c["plate_px"]) / e0,
                      detail_match.hf_energy(out, core, c["plate_px"]) / e0))
        edges.append((edge_energy(over(swapped, c), c["matte"]), edge_energy(out, c["matte"]))
                     / np.float64(edge_energy(c["lin"], c["matte"])))
    assert len(des) == 3
    assert np.median([d for _, d in des]) < 2.5, des  # the target for the whole engine: median <= 2.0
    for (raw_de, de), (raw_s, s), (raw_e, e) in zip(des, sharp, edges, strict=True):
        assert de < 4.0 and de < raw_de / 4, des
        assert raw_s > 1.5 and s < 1.25, sharp  # the photo is far sharper than the plate: softened, never sharper
        assert e < max(raw_e, 1.05), edges
    if min(s for _, s in sharp) <= 0.8:
        # Known (issue 10 open): since the detail step fits the inner skin away from the edge handoff, this
        # stage-level chain leaves the third face (72 px between its jaw points) at ~0.72 of the plate's detail,
        # while the engine's own render of these frames measures 1.08-1.15 (bench/QUALITY.md).
        pytest.xfail(f"sharpness under 0.8 of the plate on a face of this chain: {sharp}")


def test_a_studio_sheen_is_compressed_and_dark_detail_kept():
    # A studio key light's specular patch on the source's nose (1.8x the skin around it) must not print onto the
    # plate as a pale patch; a brow (0.4x) and an HDR glint (6x, above 1.0) pass unchanged.
    swapped, c = pair("paul_rudd", "astronaut")
    base = lighting.base_layer(swapped, c["skin"], c["scale"])
    test = base.copy()
    test[10:14, 10:14] *= 1.8
    test[20:24, 20:24] *= 0.4
    test[30:34, 30:34] = 6.0
    f = lighting.highlight_factor(test, base)
    sheen = np.log(test[12, 12] * f[12, 12] / base[12, 12]).mean()
    assert lighting.HIGHLIGHT_KNEE < sheen < lighting.HIGHLIGHT_LIMIT
    assert f[22, 22] == pytest.approx(1.0)
    assert f[32, 32] == pytest.approx(1.0)
    assert f[2, 40] == pytest.approx(1.0)  # the base itself: no detail, nothing to compress


def test_the_swaps_eyes_keep_their_own_colour_on_a_warm_plate():
    """paul_rudd onto shea_whigham (a warm, ruddy plate): between the lids the swap keeps its own colour, so the
    whites stay near neutral; with the skin's colour filled across them (CHROMA_DETAIL alone) they took its hue."""
    swapped, c = pair("paul_rudd", "shea_whigham")
    eyes = face_symmetry.eye_openings(c["lm"], c["size"], c["scale"])
    assert eyes.max() > 0.99 and eyes[c["skin"] > 0.5].mean() < 0.05  # the eyes, not the skin
    kept = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], colour_keep=eyes)
    skin_hued = lighting.relight(swapped, c["lin"], c["skin"], c["scale"])
    lum = swapped @ _LUMA.astype(np.float32)
    inside = (eyes > 0.9) & (lum > np.percentile(lum[eyes > 0.9], 70))  # the brightest of the eye: its whites

    def chroma(img: np.ndarray) -> float:
        lab = lin_to_lab(np.clip(img[inside].mean(0), 0, 1))
        return float(np.hypot(lab[1], lab[2]))

    assert inside.sum() > 20
    assert chroma(kept) < 0.6 * chroma(skin_hued)
    assert abs(chroma(kept) - chroma(swapped)) < 0.5 * abs(chroma(skin_hued) - chroma(swapped))
    outside = c["skin"] > 0.5  # the skin itself is relit as before
    assert np.abs(kept[outside] - skin_hued[outside]).max() < 1e-6


def test_a_plate_highlight_in_the_shape_zone_does_not_grey_the_face():
    """A white specular patch on the plate's nose bridge (a retouched photo's): inside the shape zone the swap's
    own shading replaces the plate's light, so the patch's pale colour must not stay under the swap's darker skin
    (t1.jpg in the demo: grey noses). The relit colour there keeps the saturation it has without the patch."""
    swapped, c = pair("paul_rudd", "astronaut")
    zone = lighting.shape_zone(c["lm"], c["size"], c["scale"])
    yy, xx = np.mgrid[0:c["size"], 0:c["size"]]
    cx, cy = c["lm"][28]
    spot = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (0.06 * c["scale"]) ** 2).astype(np.float32) * c["skin"]
    hot = c["lin"] + 0.35 * spot[..., None]
    patch = spot > 0.5
    assert patch.sum() > 40 and zone[patch].min() > 0.99

    def saturation(img: np.ndarray) -> float:  # log red over blue of the patch's mean
        v = img[patch].mean(0)
        return float(np.log(v[0] / v[2]))

    assert saturation(hot) < 0.7 * saturation(c["lin"])  # the highlight pales the plate there
    plain = lighting.relight(swapped, c["lin"], c["skin"], c["scale"], zone=zone)
    lit = lighting.relight(swapped, hot, c["skin"], c["scale"], zone=zone)
    assert saturation(lit) > 0.9 * saturation(plain)
    diffuse = lighting.diffuse_base(hot, c["skin"], c["scale"])
    assert float(np.log(diffuse[patch].mean(0)[0] / diffuse[patch].mean(0)[2])) > 0.9 * saturation(
        lighting.base_layer(c["lin"], c["skin"], c["scale"]))
