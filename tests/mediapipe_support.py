"""Shared by the MediaPipe tests: the model files (fetched as ``make env`` does) and the reference fixtures."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from engine.models import catalogue, wheel_members

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mediapipe")
if FIXTURES not in sys.path:
    sys.path.insert(0, FIXTURES)

import inputs  # noqa: E402  (tests/fixtures/mediapipe/inputs.py: the images the fixtures were made from)


def ensure_models() -> None:
    """The three face models in the models folder (a no-op once ``make env`` fetched them)."""
    wheel_members.ensure()


def reference() -> dict:
    with open(os.path.join(FIXTURES, "reference.json"), encoding="utf-8") as fh:
        return json.load(fh)


def image(name: str, ref: dict) -> np.ndarray:
    """The fixture's input, checked to be the very pixels MediaPipe saw."""
    im = inputs.load(name)
    assert inputs.md5(im) == ref["cases"][name]["md5"], f"{name}: decoded pixels differ from the fixture's"
    return im


def entry(model_id: str) -> catalogue.ModelEntry:
    return catalogue.get(model_id)
