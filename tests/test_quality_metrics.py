"""Each figure of the quality report on a constructed case where its value is known."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from engine.errors import EngineError
from engine.quality import metrics, report
from engine.quality.faces import FaceAnalyser, read_rgb
from engine.quality.reference_poisson import poisson_swap
from engine.stages.colour_match import lab_to_lin
from tests.conftest import run_cli

# Pairs from Sharma, Wu and Dalal (2005), "The CIEDE2000 color-difference formula", Table 1.
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 3.1571, -77.2803), (50.0, 0.0, -82.7485), 2.8615),
    ((50.0, 2.8361, -74.0200), (50.0, 0.0, -82.7485), 3.4412),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((50.0, 2.5, 0.0), (61.0, -5.0, 29.0), 22.8977),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
]


def _grey_from_l(l_star: np.ndarray) -> np.ndarray:
    """Linear grey pixels with the given L* (an (..., 3) image)."""
    lab = np.stack([l_star, np.zeros_like(l_star), np.zeros_like(l_star)], axis=-1)
    return lab_to_lin(lab).astype(np.float64)


def _face_landmarks(gap: float = 0.0) -> np.ndarray:
    """68 points of a frontal face 100 px between the eye centres, inner lips ``gap`` px apart."""
    lm = np.zeros((68, 2))
    lm[:17] = np.stack([np.linspace(40, 160, 17), 100 + 60 * np.sin(np.linspace(0, np.pi, 17))], axis=1)
    lm[36:42] = (50, 80) + np.array([[-8, 0], [-4, -3], [4, -3], [8, 0], [4, 3], [-4, 3]])
    lm[42:48] = lm[36:42] + (100, 0)
    lm[27:36] = [[100, 80], [100, 90], [100, 100], [100, 110], [92, 115], [96, 116], [100, 117], [104, 116],
                 [108, 115]]
    lm[48:60] = (100, 140) + np.array([[-20, 0], [-12, -6], [-5, -8], [0, -7], [5, -8], [12, -6], [20, 0], [12, 7],
                                       [5, 9], [0, 9], [-5, 9], [-12, 7]])
    lm[60:68] = (100, 140) + np.array([[-16, 0], [-6, -2], [0, -2], [6, -2], [16, 0], [6, 2], [0, 2], [-6, 2]])
    lm[61:64, 1] -= gap / 2
    lm[65:68, 1] += gap / 2
    return lm


@pytest.mark.parametrize(("lab1", "lab2", "expected"), SHARMA)
def test_ciede2000_matches_the_published_test_pairs(lab1, lab2, expected):
    assert metrics.delta_e2000(np.array(lab1), np.array(lab2)) == pytest.approx(expected, abs=1e-4)
    assert metrics.delta_e2000(np.array(lab2), np.array(lab1)) == pytest.approx(expected, abs=1e-4)


def test_ciede2000_agrees_with_scikit_image_on_random_colours():
    skcolor = pytest.importorskip("skimage.color")
    rng = np.random.default_rng(7)
    a = np.column_stack([rng.uniform(0, 100, 500), rng.uniform(-80, 80, 500), rng.uniform(-80, 80, 500)])
    b = a + rng.normal(0, 6, a.shape)
    assert np.allclose(metrics.delta_e2000(a, b), skcolor.deltaE_ciede2000(a, b), atol=1e-6)


def test_skin_delta_e_is_zero_for_identical_images_and_the_lab_offset_for_a_known_shift():
    lm = _face_landmarks()
    plate = np.full((220, 220, 3), 0.2)
    assert metrics.skin_delta_e(plate, plate.copy(), lm) == (0.0, 0.0)
    lab = metrics.lab_d65(plate)
    shifted = lab_to_lin(lab + (3.0, 4.0, 0.0)).astype(np.float64)  # CIE76 distance exactly 5
    de76, de00 = metrics.skin_delta_e(plate, shifted, lm)
    assert de76 == pytest.approx(5.0, abs=1e-3)
    assert de00 == pytest.approx(float(metrics.delta_e2000(lab[0, 0], lab[0, 0] + (3.0, 4.0, 0.0))), abs=1e-3)
    assert de00 > de76  # near neutral, CIEDE2000 stretches a* (G = 0.5): the 4 units of a* weigh 6


def test_skin_delta_e_clips_linear_values_to_one_before_lab():
    lm = _face_landmarks()
    white = np.ones((220, 220, 3))
    assert metrics.skin_delta_e(white, white * 4.0, lm)[0] == pytest.approx(0.0, abs=1e-9)


def test_cheek_patches_sit_on_the_cheeks_and_scale_with_the_eye_distance():
    lm = _face_landmarks()
    left, right = metrics.cheek_patches(lm, (220, 220))
    r = 0.15 * 100
    assert left.sum() == pytest.approx(np.pi * r * r, rel=0.1)
    assert np.argwhere(left)[:, 1].mean() < 100 < np.argwhere(right)[:, 1].mean()


def test_edge_ratio_is_one_for_identical_images_four_for_doubled_gradients_and_above_one_at_a_seam():
    x = np.tile(np.arange(200, dtype=np.float64), (200, 1))
    plate = _grey_from_l(30.0 + 0.15 * x)
    matte = np.zeros((200, 200))
    matte[50:150, 50:150] = 1.0
    assert metrics.edge_ratio(plate, plate.copy(), matte) == pytest.approx(1.0)
    doubled = _grey_from_l(30.0 + 0.30 * x)
    assert metrics.edge_ratio(doubled, plate, matte) == pytest.approx(4.0, rel=1e-3)
    seam = plate.copy()
    seam[matte > 0] *= 1.4  # a hard exposure step at the matte's edge
    assert metrics.edge_ratio(seam, plate, matte) > 1.5
    band = metrics.contour_band(matte)
    assert band[50, 100] and band[47, 100] and band[52, 100] and not band[100, 100] and not band[10, 100]


def test_flicker_ratio_is_one_when_the_face_follows_the_plate_and_the_ratio_of_changes_otherwise():
    plates = [_grey_from_l(np.full((20, 20), v)) for v in (50.0, 52.0, 54.0, 56.0)]
    results = [_grey_from_l(np.full((20, 20), v)) for v in (50.0, 54.0, 54.0, 58.0)]
    mattes = [np.ones((20, 20))] * 4
    assert metrics.flicker_ratio(plates, [p.copy() for p in plates], mattes) == pytest.approx(1.0)
    assert metrics.flicker_ratio(results, plates, mattes) == pytest.approx((8.0 / 3.0) / 2.0, rel=1e-4)
    with pytest.raises(ValueError, match="one result, plate and matte per frame"):
        metrics.flicker_ratio(results[:2], plates, mattes)


def test_face_flicker_links_faces_by_overlap_and_ignores_faces_entering_the_frame():
    a, b = np.array([0.0, 0.0, 100.0, 100.0]), np.array([300.0, 0.0, 400.0, 100.0])
    faces = [(1, a, 50.0, 50.0), (2, a + 5, 53.0, 52.0), (3, a + 10, 50.0, 54.0),  # result changes 3, 3; plate 2, 2
             (2, b, 90.0, 20.0), (3, b, 90.0, 20.0)]  # a still face: changes 0 and 0
    assert metrics.face_flicker_ratio(faces) == pytest.approx((3 + 3 + 0) / (2 + 2 + 0))
    assert metrics.face_flicker_ratio(faces[:3] + [(3, b, 10.0, 90.0)]) == pytest.approx(1.5)  # b enters: unlinked
    assert np.isnan(metrics.face_flicker_ratio([(1, a, 50.0, 50.0), (3, a, 60.0, 60.0)]))  # no consecutive frames
    assert metrics.box_iou(a, a + 50) == pytest.approx(2500 / 17500)


def test_sharpness_ratio_is_one_for_identical_images_and_falls_for_a_softened_face():
    rng = np.random.default_rng(3)
    plate = _grey_from_l(50.0 + rng.normal(0, 4, (120, 120)))
    skin = np.ones((120, 120))
    assert metrics.sharpness_ratio(plate, plate.copy(), skin) == pytest.approx(1.0)
    soft = cv2.GaussianBlur(plate.astype(np.float32), (0, 0), 2.0).astype(np.float64)
    assert metrics.sharpness_ratio(soft, plate, skin) < 0.2


def test_identity_figures_from_known_embeddings():
    src, org = np.zeros(128), np.full(128, 0.1)
    near_source = [np.full(128, 0.02), np.full(128, 0.03)]
    figures = metrics.identity_figures(near_source + [org.copy()], src, [org] * 3)
    assert figures["closer_to_source"] == pytest.approx(2 / 3)
    assert figures["to_source"] == pytest.approx((0.02 + 0.03 + 0.1) * np.sqrt(128) / 3)
    assert figures["to_original"] == pytest.approx((0.08 + 0.07 + 0.0) * np.sqrt(128) / 3)


def test_expression_is_the_inner_lip_gap_over_the_eye_distance():
    closed, open_ = _face_landmarks(0.0), _face_landmarks(30.0)
    assert metrics.eye_distance(closed) == pytest.approx(100.0)
    assert metrics.mouth_open_ratio(closed) == pytest.approx(0.04)  # the 4 px drawn between the lips
    assert metrics.mouth_open_ratio(open_) == pytest.approx(0.34)
    assert metrics.expression_error(closed, open_) == pytest.approx(0.30)
    assert metrics.expression_error(open_, open_.copy()) == 0.0


def test_untouched_share_counts_bits_not_values_and_ignores_touched_pixels():
    plate = np.random.default_rng(1).random((30, 30, 4)).astype(np.float32)
    matte = np.zeros((30, 30), np.float32)
    matte[10:20, 10:20] = 0.5
    result = plate.copy()
    result[15, 15] = 0.0  # touched: does not count
    assert metrics.untouched_bit_exact(result, plate, matte) == 1.0
    result[0, 0, 2] = np.nextafter(plate[0, 0, 2], np.float32(2.0))  # one bit off on one untouched pixel
    assert metrics.untouched_bit_exact(result, plate, matte) == pytest.approx(1.0 - 1.0 / 800)


def test_coverage_is_the_share_of_faces_under_the_matte():
    matte = np.zeros((100, 200), np.float32)
    matte[10:60, 10:60] = 1.0
    boxes = [np.array([10, 10, 60, 60]), np.array([120, 20, 170, 70])]
    assert metrics.coverage(boxes, matte) == 0.5
    assert np.isnan(metrics.coverage([], matte))


def test_the_poisson_reference_changes_only_the_hull_of_the_target_landmarks(photos):
    analyser = FaceAnalyser()
    target = read_rgb(photos["astronaut"])
    source = read_rgb(photos["tom_hanks"])
    t_face = max(analyser.find(target), key=lambda f: f.box[2] - f.box[0])
    s_face = max(analyser.find(source), key=lambda f: f.box[2] - f.box[0])
    result, mask = poisson_swap(source, s_face.lm68, target, t_face.lm68)
    hull = np.zeros(target.shape[:2], np.uint8)
    cv2.fillConvexPoly(hull, cv2.convexHull(np.round(t_face.lm68).astype(np.int32)), 1)
    assert np.array_equal(mask > 0, hull > 0)  # the whole hull, not a ring
    assert np.array_equal(result[mask == 0], target[mask == 0])
    assert np.abs(result[mask > 0].astype(int) - target[mask > 0]).mean() > 5  # the face really changed


def test_the_quality_command_renders_measures_and_writes_report_and_sheets(tmp_path, photos):
    out = tmp_path / "report"
    # Annotated: her face and a 'face' on the flag that nobody replaces -> coverage 1/2.
    annotations = tmp_path / "faces.json"
    annotations.write_text(json.dumps({"1": [[175, 76, 265, 166], [0, 0, 60, 60]]}))
    proc = run_cli("quality", "--source", photos["tom_hanks"], "--target", photos["astronaut"],
                   "--reference", "poisson", "--output", str(out), "--annotations", str(annotations))
    assert proc.returncode == 0, proc.stderr
    text = (out / "report.md").read_text()
    assert "| engine |" in text and "| reference poisson |" in text
    assert "**edge ratio** (`metrics.edge_ratio`)" in text  # every figure is defined in the report
    row = next(line for line in text.splitlines() if line.startswith("| engine |")).split("|")[2:-1]
    header = next(line for line in text.splitlines() if line.startswith("| run |")).split("|")[2:-1]
    figures = dict(zip([h.strip() for h in header], [float(v) for v in row], strict=True))
    assert figures["faces"] == 1  # measured: the astronaut, not her mission patch
    assert figures["coverage"] == 0.5
    assert "the hand-annotated faces" in text
    assert figures["untouched bit-exact"] == 1.0
    assert 0.0 < figures["dE76 median"] < 40.0
    per_frame = (out / "per_frame.csv").read_text().splitlines()
    assert per_frame[0].startswith("run,frame,") and len(per_frame) == 3  # header, engine face, reference face
    for sheet in ("frames.png", "faces.png"):
        img = cv2.imread(str(out / sheet))
        assert img is not None and img.shape[0] >= 160


def test_annotations_read_from_json_or_an_annotation_module_in_engine_frame_numbers(tmp_path):
    module = tmp_path / "faces.py"
    module.write_text('"""doc"""\nFACES: dict = {0: [(10, 20, 70, 80)], 4: [(1, 2, 3, 4), (5, 6, 7, 8)]}\n'
                      'import os\nos.remove(__file__)\n')  # never run: the file must survive being read
    faces = report.load_annotations(str(module))
    assert sorted(faces) == [1, 5] and module.exists()  # decode index 0 is the movie's frame 1
    assert np.array_equal(faces[1][0], [10, 20, 70, 80]) and len(faces[5]) == 2
    data = tmp_path / "faces.json"
    data.write_text(json.dumps({"1001": [[0, 0, 60, 60]]}))
    assert np.array_equal(report.load_annotations(str(data))[1001][0], [0, 0, 60, 60])
    data.write_text("{broken")
    with pytest.raises(EngineError, match="cannot be used"):
        report.load_annotations(str(data))
    assert len(report.load_annotations("tests/walkers_annotations.py")) == 10


def test_faces_under_60_px_are_summarised_apart_from_the_target_faces():
    run = report.Run("engine")
    run.frames, run.levels, run.untouched = [1], [(50.0, 50.0)], [1.0]
    run.covered = [(100.0, True), (40.0, False), (45.0, True)]
    for width, de in ((100.0, 1.0), (120.0, 3.0), (40.0, 9.0)):
        run.faces.append(report.FaceRow(1, np.array([0.0, 0.0, width, width]), de, de, 1.0, 0.3, 0.7, 0.0, 1.0,
                                        50.0, 50.0))
    big, small = report.summary(run), report.summary(run, small=True)
    assert (big["faces"], big["dE76 median"], big["coverage"]) == (2, 2.0, 1.0)
    assert (small["faces"], small["dE76 median"], small["coverage"]) == (1, 9.0, 0.5)


def test_a_face_edge_ratio_sees_its_own_contour_only():
    x = np.tile(np.arange(300, dtype=np.float64), (100, 1))
    plate = _grey_from_l(30.0 + 0.1 * x)
    result, matte = plate.copy(), np.zeros((100, 300))
    matte[40:60, 40:60] = 1.0
    matte[40:60, 240:260] = 1.0
    result[40:60, 240:260] *= 1.4  # a seam on the right face only
    left = report.face_window(np.array([40.0, 40.0, 60.0, 60.0]), matte.shape)
    right = report.face_window(np.array([240.0, 40.0, 260.0, 60.0]), matte.shape)
    assert (left[1].start, left[1].stop, left[0].start, left[0].stop) == (28, 72, 28, 72)
    assert metrics.edge_ratio(result[left], plate[left], matte[left]) == pytest.approx(1.0)
    whole = metrics.edge_ratio(result, plate, matte)
    assert metrics.edge_ratio(result[right], plate[right], matte[right]) > whole > 1.5
