#!/usr/bin/env bash
# Issue 34's baseline on a lent GPU machine, in ONE device call: today's engine (Engine.run) on the shots that
# `run.py --prepare .ffprep` made here. Carry: .whl (the cp312 OpenImageIO wheel; an onnxruntime-gpu wheel too, if
# one fits) and .ffprep. Writes $OUT/pipeline.json, $OUT/log.txt, $OUT/machine.txt.
#
#   run(command="bash bench/gpu_check/device_pipeline.sh", carry=[".whl", ".ffprep"], timeout_s=420)
#
# BUDGET (seconds, default 300) bounds the measured runs; the script ends well inside the call's timeout.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/ff_out}
mkdir -p "$OUT"
BUDGET=${BUDGET:-300}
SHOTS=${SHOTS:-2,6}
VARIANTS=${VARIANTS:-default,neural}
WHEELS=${WHEELS:-.whl}
SITE=${SITE:-/tmp/site}
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  nproc
  python3 --version
} >"$OUT/machine.txt" 2>&1
# The engine's missing packages as wheels (no index there); --no-deps: numpy is the image's own.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
  >>"$OUT/machine.txt" 2>&1 || { echo "wheel install failed" | tee -a "$OUT/machine.txt"; exit 3; }
export PYTHONPATH=$SITE:$PWD
# CUDA libraries of the image's nvidia-* wheels, for an onnxruntime-gpu that was carried (the CPU build ignores them).
LD_LIBRARY_PATH=$(python3 - <<'EOF'
import glob, os, site
dirs = [d for p in site.getsitepackages() for d in glob.glob(os.path.join(p, "nvidia", "*", "lib"))]
print(":".join(dirs + [os.environ.get("LD_LIBRARY_PATH", "")]))
EOF
)
export LD_LIBRARY_PATH
python3 - >>"$OUT/machine.txt" 2>&1 <<'EOF'
import numpy, cv2, onnxruntime, OpenImageIO
print("numpy", numpy.__version__, "opencv", cv2.__version__, "onnxruntime", onnxruntime.__version__,
      onnxruntime.get_available_providers(), "OpenImageIO", OpenImageIO.__version__)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())
except Exception as exc:  # the engine does not use torch yet: context only
    print("torch:", exc)
EOF
cat "$OUT/machine.txt"
set -o pipefail
timeout $((BUDGET + 60)) python3 bench/gpu_check/run.py --pipeline .ffprep --shots "$SHOTS" --variants "$VARIANTS" \
  --budget "$BUDGET" --out "$OUT/pipeline.json" 2>&1 | tee "$OUT/log.txt"
echo "exit $?"
