#!/usr/bin/env bash
# Blender tests, once per supported Blender: each version gets its own venv holding only bpy (which needs
# numpy < 2) and pytest — never the engine's packages. The engine runs as a subprocess from the engine
# venv (.venv, made by `make env`). Creates the venvs from nothing on first run.
#
#   bash tests/blender/run.sh            # every version
#   BLENDER_VERSIONS="5.0" bash tests/blender/run.sh -k sequencer
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3.11}
VERSIONS=${BLENDER_VERSIONS:-"4.2 5.0"}
export FACE_FUSION_ENGINE_PYTHON=${FACE_FUSION_ENGINE_PYTHON:-$ROOT/.venv/bin/python}
export FACE_FUSION_ENGINE_ROOT=${FACE_FUSION_ENGINE_ROOT:-$ROOT}

if [ ! -x "$FACE_FUSION_ENGINE_PYTHON" ]; then
  echo "engine environment missing ($FACE_FUSION_ENGINE_PYTHON): run 'make env' first" >&2
  exit 2
fi

status=0
for v in $VERSIONS; do
  venv=".venv-bpy-$v"
  req="requirements/blender-$v.txt"
  stamp="$venv/.installed"
  if [ ! -f "$stamp" ] || [ "$req" -nt "$stamp" ]; then
    echo "== creating $venv from $req"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$req"
    touch "$stamp"
  fi
  echo "== Blender $v"
  # Each run gets its own Blender user folder (preferences, installed extensions).
  user_dir=$(mktemp -d "${TMPDIR:-/tmp}/ff-blender-$v-XXXXXX")
  if ! BLENDER_USER_RESOURCES="$user_dir" "$venv/bin/python" -m pytest tests/blender -q -m blender \
       -p no:cacheprovider "$@"; then
    status=1
  fi
  rm -rf "$user_dir"
done
exit $status
