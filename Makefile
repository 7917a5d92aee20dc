# Two commands matter: `make demo` (the main job on the embedded default) and `make test`.
# Each creates what it needs from nothing: the engine environment in .venv (never Blender's Python).
PYTHON ?= python3.11
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: env demo test test-engine test-blender ofx lint bench clean

$(STAMP): requirements/engine.txt requirements/dev.txt requirements/data-packages.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements/dev.txt
	$(VPY) -m pip install --quiet --no-deps -r requirements/data-packages.txt
	touch $(STAMP)

# MediaPipe's face models come from the pinned mediapipe wheel (pip download, checked against the catalogue's
# sha256); a no-op once they are in the models folder.
env: $(STAMP)
	$(VPY) -m engine.models.wheel_members

demo: env
	$(VPY) -m engine demo --output demo_out

test: test-blender ofx test-engine  # Blender venvs first: the engine tests also run the client in Blender's Python

# The OpenFX plugin (issue 37): MLT's melt (a real OpenFX host, built once from ../shared/tools/ofx-host into
# .cache-ofx), the bundle and its tests' programs (ofx/build), and a Python 3.12 engine for the handshake test.
# tests/test_ofx_*.py run with the engine tests.
OFX_HOST ?= $(firstword $(wildcard ../shared/tools/ofx-host /work/shared/tools/ofx-host))
PY312 ?= $(firstword $(wildcard /usr/bin/python3.12 /usr/local/bin/python3.12 $(HOME)/.pyenv/versions/3.12*/bin/python3.12))
ofx: env
	@test -n "$(OFX_HOST)" || { echo "no ofx-host tools (../shared/tools/ofx-host)"; exit 1; }
	bash $(OFX_HOST)/build-melt.sh $(abspath .cache-ofx/melt) >/dev/null
	cmake -S ofx -B ofx/build -DCMAKE_BUILD_TYPE=Release -DOFX_SDK_ARCHIVE=$(abspath $(OFX_HOST))/openfx-sdk.tar.xz >/dev/null
	cmake --build ofx/build -j2 >/dev/null
	@if [ -n "$(PY312)" ] && [ ! -x .cache-ofx/py312/bin/python ]; then \
	  rm -rf .cache-ofx/py312.tmp && $(PY312) -m venv .cache-ofx/py312.tmp && \
	  .cache-ofx/py312.tmp/bin/pip install --quiet "$$(grep '^numpy==' requirements/engine.txt)" && \
	  mv .cache-ofx/py312.tmp .cache-ofx/py312; fi

test-engine: env
	$(VPY) -m ruff check .
	$(VPY) -m pytest tests -q -m "not blender"

test-blender: env  # the engine the add-on starts needs the embedded models too
	bash tests/blender/run.sh

lint: $(STAMP)
	$(VPY) -m ruff check .

bench: $(STAMP)
	$(VPY) bench/throughput.py

clean:
	rm -rf $(VENV) .venv-bpy-* demo_out build dist ofx/build .cache-ofx
