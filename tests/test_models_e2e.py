"""`python -m engine swap --swapper <neural id>` on stand-in graphs, end to end (EXRs read back)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

from engine import settings
from engine.models import catalogue
from tests.conftest import ROOT, read, rgba
from tests.neural import standins


def test_settings_list_the_catalogue_swappers():
    """A broken catalogue must fail here, not silently drop the neural tests."""
    assert {"inswapper_128", "hyperswap_1a_256", "simswap_256"} <= {c[0] for c in settings.BY_NAME["swapper"].choices}


@pytest.fixture(scope="module")
def stand(tmp_path_factory):
    return standins.build(tmp_path_factory.mktemp("e2e_standins"))


@pytest.mark.parametrize("swapper", ["inswapper_128", "hyperswap_1a_256"])
def test_swap_cli_with_a_neural_swapper(stand, photos, t1_shot, tmp_path, swapper):
    out = tmp_path / swapper
    env = dict(os.environ, **{catalogue.ENV_CATALOGUE: str(stand.catalogue),
                              catalogue.ENV_MODELS_DIR: str(stand.models_dir)})
    r = subprocess.run([sys.executable, "-m", "engine", "swap", "--source", photos["astronaut"], "--target",
                        t1_shot["pattern"], "--output", str(out), "--frames", "1-2", "--quiet",
                        "--swapper", swapper], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr
    files = sorted(glob.glob(str(out / "*.exr")))
    assert len(files) == 2
    ch, attrs = read(files[0])
    px = rgba(ch)
    assert px[..., 3].max() > 0.5  # a face was swapped and matted
    assert any(swapper in str(v) for v in attrs.values())  # provenance names the model
    assert np.isfinite(px).all()
