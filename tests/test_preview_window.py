"""A first look before the shot analysis: a preview with ``analysis_window`` on a shot not analysed yet analyses only
the frames near it, keeps that analysis nowhere and says so (``window``); once the shot is analysed the same request
gives the final pixels."""

from __future__ import annotations

import os

import numpy as np
import pytest

from engine import shots
from engine.analysis import store
from engine.job import ImageInput, SwapJob
from engine.pipeline import Engine


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    d = str(tmp_path / "analysis_cache")
    monkeypatch.setenv(store.ENV_CACHE_DIR, d)
    return d


@pytest.fixture(scope="module")
def plate(tmp_path_factory):
    photo = shots.load_photo_linear("t1")[140:450, 215:725]
    frames, _ = shots.render_shot(photo, (320, 180), 9, shots.CameraMove(pan=(-20, 8)))
    return shots.write_sequence(frames, str(tmp_path_factory.mktemp("plate")))


def _preview(eng: Engine, plate: str, source: str, frame: int, window: int):
    job = SwapJob(sources=[ImageInput(path=source)], plate=ImageInput(path=plate), output_dir=None,
                  settings={"output_mode": "composite"})
    return eng.preview(job, frame, window)


def _stored(cache_dir: str) -> list[str]:
    folder = os.path.join(cache_dir, "analysis")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_a_first_look_analyses_a_few_frames_and_keeps_nothing(cache_dir, plate, photos):
    eng = Engine()
    look = _preview(eng, plate, photos["tom_hanks"], 5, 2)
    assert look.window and look.faces >= 1 and look.rgba.shape == (180, 320, 4)
    assert _stored(cache_dir) == [] and not eng._analyses  # neither stored nor remembered: no render reads it
    final = _preview(eng, plate, photos["tom_hanks"], 5, 0)  # the shot's own analysis, stored
    assert not final.window and len(_stored(cache_dir)) == 1
    again = _preview(Engine(), plate, photos["tom_hanks"], 5, 2)  # analysed now: the window is not used
    assert not again.window and np.array_equal(again.rgba, final.rgba)


def test_the_request_field_is_checked():
    from engine import protocol

    msg = {"plate": {"path": "/p/plate.####.exr"}, "sources": [{"path": "/p/me.png"}], "frame": 3}
    parse = protocol.JOB_KINDS["preview"].parse
    assert parse(msg)["analysis_window"] == 0 and parse({**msg, "analysis_window": 4})["analysis_window"] == 4
    with pytest.raises(protocol.ProtocolError, match="analysis_window"):
        parse({**msg, "analysis_window": -1})
