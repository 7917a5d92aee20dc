"""Several source photos as views of one head (engine.sources.SourceViews): each target face is painted by the
photo whose head turn is nearest its own, cross-faded between two, so a turned plate face gets a turned photo."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine
from engine.sources import VIEW_FADE, SourceViews
from engine.stages import geometry68
from tests import shared_data


@pytest.fixture(scope="module")
def engine():
    return Engine()


@pytest.fixture(scope="module")
def jolie(tmp_path_factory):
    """angelina_jolie.jpg (turned: her image-right cheek foreshortened) and its mirror image, the same head seen
    turned the other way."""
    path = shared_data.path("photos", "angelina_jolie.jpg")
    if not shared_data.os.path.exists(path):
        pytest.skip("the shared photos are not here")
    mirror = str(tmp_path_factory.mktemp("views") / "jolie_mirror.png")
    cv2.imwrite(mirror, cv2.imread(path)[:, ::-1])
    return path, mirror


def _faces(engine, *paths):
    return engine.source_identity([ImageInput(path=p) for p in paths], lambda e: None).faces


def test_head_turn_reads_a_mirrored_photo_as_the_opposite_turn(engine, jolie):
    j, m = _faces(engine, *jolie)
    rudd = _faces(engine, shared_data.path("photos", "paul_rudd.jpg"))[0]
    tj, tm = geometry68.turn(j.face.landmarks68), geometry68.turn(m.face.landmarks68)
    assert tj > 0.3
    assert abs(tj + tm) < 0.1  # the mesh is not quite mirror-symmetric: 0.58 and -0.50
    assert abs(geometry68.turn(rudd.face.landmarks68)) < 0.08


def test_views_by_turn_and_their_cross_fade(engine, jolie):
    rudd_path = shared_data.path("photos", "paul_rudd.jpg")
    j, m, rudd = _faces(engine, *jolie, rudd_path)
    views = SourceViews([j, rudd, m], None)
    assert [tex.source for tex in views.textures] == [m, rudd, j]  # ordered by turn: -0.50, 0, 0.58
    tm, tr, tj = views.turns
    assert views.weights(tj + 0.2) == [(1.0, 2)] and views.weights(tm - 0.2) == [(1.0, 0)]
    assert views.weights(tr) == [(1.0, 1)]  # a frontal face: the frontal photo alone
    (a, ia), (b, ib) = views.weights((tr + tj) / 2)  # halfway: half each
    assert (ia, ib) == (1, 2) and a == pytest.approx(0.5) and b == pytest.approx(0.5)
    # The fade is continuous and confined to VIEW_FADE either side of the midpoint: a turning head never pops.
    turns = np.linspace(tm - 0.3, tj + 0.3, 2001)
    share = np.array([sum(w * i for w, i in views.weights(t)) for t in turns])  # 0..2, the view index blended
    assert np.abs(np.diff(share)).max() < 0.01
    fading = (share % 1.0 > 1e-9)
    assert np.all(np.abs(turns[fading] - np.where(turns[fading] < tr, (tm + tr) / 2, (tr + tj) / 2)) <= VIEW_FADE)
    for t in turns[::50]:
        assert sum(w for w, _ in views.weights(t)) == pytest.approx(1.0)


def test_photos_that_look_the_same_way_are_one_view_the_largest(engine):
    rudd = shared_data.path("photos", "paul_rudd.jpg")
    if not shared_data.os.path.exists(rudd):
        pytest.skip("the shared photos are not here")
    big = _faces(engine, rudd)[0]
    small = _faces(engine, shared_data.path("photos", "shea_whigham.jpg"))[0]  # frontal too, a smaller face
    assert small.face.size < big.face.size
    views = SourceViews([small, big], None)
    assert [tex.source for tex in views.textures] == [big]
    (view,) = views.get(256, 100.0, turn=0.4)
    crop, pts = views.textures[0].get(256, 100.0)
    assert view.weight == 1.0 and view.crop is crop and view.points is pts


def test_a_turned_plate_face_is_painted_by_the_photo_turned_its_way(engine, jolie, tmp_path):
    """The walkers boy in 3/4 view (frame 60, turn -0.52): given both Jolie and her mirror image, the engine paints
    him with the mirror image alone (its mattes are those of the mirror image's render), whose source region covers
    his near cheek, which the photo turned the other way squeezes out of the matte."""
    pattern = shared_data.walkers_segment(str(tmp_path), 60, 60)
    frame = cv2.imread(pattern.replace("####", "0060"))[560:880, 760:1080]  # the boy, 107 px wide, and his surround
    plate = np.ones(frame.shape[:2] + (4,), np.float32)
    plate[..., :3] = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB).astype(np.float32) / 255.0
    plate[..., :3] = np.where(plate[..., :3] <= 0.04045, plate[..., :3] / 12.92,
                              ((plate[..., :3] + 0.055) / 1.055) ** 2.4)
    j, m = jolie

    def render(*sources):
        job = SwapJob(sources=[ImageInput(path=p) for p in sources], plate=ImageInput(pixels=plate),
                      output_dir=None, settings={"output_mode": "composite"})
        result = engine.preview(job, 1)
        assert result.faces == 1
        return result

    both, mirrored, turned_away = render(j, m), render(m), render(j)
    for layer in ("FaceMatte", "SourceRegion"):
        np.testing.assert_array_equal(both.mattes[layer], mirrored.mattes[layer])
    # The pixels too, but for the invisible watermark, whose payload names the sources (a lattice step of 4.6
    # 8-bit levels): the photo turned the other way paints a different face.
    face = mirrored.mattes["FaceMatte"] > 0.5
    np.testing.assert_allclose(both.rgba, mirrored.rgba, atol=0.03)
    same = float(np.abs(both.rgba - mirrored.rgba)[face].mean())
    other = float(np.abs(turned_away.rgba - mirrored.rgba)[face].mean())
    assert other > 3 * same, (same, other)
    area = {name: float(r.mattes["FaceMatte"].sum()) for name, r in (("mirrored", mirrored),
                                                                          ("turned away", turned_away))}
    assert area["mirrored"] > 1.1 * area["turned away"], area


def test_a_face_between_two_views_is_their_cross_fade(engine, jolie):
    """The swapper's two-view path: one photo split 0.3 / 0.7 is that photo; two photos half each lie between the
    two photos' own swaps; a face turned halfway between the views gets exactly that half-and-half."""
    from types import SimpleNamespace

    from engine.sources import SourceTexture
    from engine.stages.swap_geometric import GeometricSwapper, SourceView

    j, m = _faces(engine, *jolie)
    rudd = _faces(engine, shared_data.path("photos", "paul_rudd.jpg"))[0]
    target, target_pts = SourceTexture(rudd, None).get(256, 256.0)
    views = SourceViews([j, m], None)
    (vm,), (vj,) = views.get(256, 256.0, views.turns[0] - 1), views.get(256, 256.0, views.turns[1] + 1)

    def swap(provided: list[SourceView], turn: float | None = None):
        sw = GeometricSwapper(SimpleNamespace(id="geometric"), source_texture=lambda size, face, t: provided)
        return sw.swap_one(target, target_pts[:68], 256.0, turn=turn)

    def share(view: SourceView, w: float) -> SourceView:
        return SourceView(w, view.crop, view.points, view.mesh)

    alone, split = swap([vj]), swap([share(vj, 0.3), share(vj, 0.7)])
    for a, b in zip(alone, split, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    only_m, half = swap([vm]), swap([share(vm, 0.5), share(vj, 0.5)])
    apart = float(np.abs(alone[0] - only_m[0]).mean())  # two different photos
    assert apart > 0.01
    # Both are warped onto their averaged shape, so the fade lies between them as a whole, not pixel by pixel.
    assert float(np.abs(half[0] - alone[0]).mean()) < apart and float(np.abs(half[0] - only_m[0]).mean()) < apart
    assert half[2].min() >= 0.0 and half[2].max() <= 1.0
    real = GeometricSwapper(SimpleNamespace(id="geometric"), source_texture=views.get)
    midway = real.swap_one(target, target_pts[:68], 256.0, turn=float(np.mean(views.turns)))
    for a, b in zip(half, midway, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_the_head_turn_is_held_along_the_track(engine, jolie):
    """The turn that picks the views is the mean of the track's turns within TURN_HOLD frames (a frame's landmarks
    jitter, and inside the fade the blend follows the turn 9 times over), the same whichever frames a job renders."""
    from engine.track_models import TURN_HOLD, TrackModels

    j, m = _faces(engine, *jolie)
    tj, tm = geometry68.turn(j.face.landmarks68), geometry68.turn(m.face.landmarks68)
    landmarks = {f: (j if f % 2 == 0 else m).face.landmarks68 for f in range(21)}  # the head flicking each frame
    whole, one = TrackModels(), TrackModels()
    whole.add_turns(7, landmarks, list(range(21)))
    one.add_turns(7, landmarks, [10])
    near = range(10 - TURN_HOLD, 10 + TURN_HOLD + 1)
    expected = np.mean([tj if f % 2 == 0 else tm for f in near])
    assert whole.turn(7, 10) == pytest.approx(expected) and one.turn(7, 10) == whole.turn(7, 10)
    assert abs(whole.turn(7, 10) - whole.turn(7, 11)) < abs(tj - tm) / 4  # held: no longer flicking
    assert one.turn(7, 11) is None and whole.turn(8, 10) is None
