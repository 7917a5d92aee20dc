# Two commands matter: `make demo` (the main job on the embedded default) and `make test`.
# Each creates what it needs from nothing: the engine environment in .venv (never Blender's Python).
PYTHON ?= python3.11
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: env demo test test-engine test-blender lint bench clean

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

test: test-blender test-engine  # Blender venvs first: the engine tests also run the client in Blender's Python

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
	rm -rf $(VENV) .venv-bpy-* demo_out build dist
