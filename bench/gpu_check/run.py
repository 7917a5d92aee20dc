"""GPU check for the neural pipeline (issue 5).

    python bench/gpu_check/run.py [--models-dir DIR] [--seconds 60] [--tensorrt] [--out result.json] [--record]
    python bench/gpu_check/run.py --cpu-smoke        # seconds, any machine: the same code path, tiny graphs
    python bench/gpu_check/run.py --prepare DIR      # engine environment: shots, analyses, identity for --pipeline
    python bench/gpu_check/run.py --pipeline DIR [--shots 2,6] [--variants default,neural] [--out r.json]

1. Reports onnxruntime, its providers and the GPU.
2. Loads each model of the neural pipeline (SCRFD, ArcFace, inswapper, GFPGAN, BiSeNet, XSeg): the real file when
   it is installed and verified in the models folder, otherwise a full-size stand-in graph with the real model's
   tensor names and shapes and roughly its compute cost (convolution stacks sized to published GFLOPs).
3. Checks every session really runs on CUDA (or TensorRT with --tensorrt, and a TensorRT probe when its libraries
   are present); a session that fell back to CPU is a FAIL, not a warning.
4. Measures frames per second of detect -> embed -> swap -> restore -> parse -> occlude -> paste back on a
   1920x1080 frame with two faces, through the engine's real backends (registry) and runtime.
Everything is bounded by a deadline (default 7 minutes) so it finishes within 8 minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

# Approximate compute of the real models (GFLOPs per image), for sizing stand-ins. inswapper_128's figure is
# InsightFace's own; the others are published figures of the architectures, rounded.
PIPELINE = {  # model id -> (stage, GFLOPs, body channels, body resolution divisor)
    "scrfd_2.5g": ("detect", 2.5, 32, 8),
    "arcface_w600k_r50": ("recognize", 6.3, 256, 4),
    "inswapper_128": ("swap", 174.7, 256, 2),
    "gfpgan_1.4": ("enhance", 86.0, 128, 4),
    "bisenet_resnet_34": ("parse", 30.0, 128, 4),
    "xseg_1": ("occlude", 20.0, 128, 4),
}
OPSET = 17


# -- stand-in graphs ---------------------------------------------------------------------------------------------

class _G:
    def __init__(self, seed: int) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.rng = np.random.default_rng(seed)
        self.n = 0
        self.flops = 0.0

    def name(self, p: str) -> str:
        self.n += 1
        return f"{p}{self.n}"

    def const(self, arr: np.ndarray, p: str = "c") -> str:
        n = self.name(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, kind: str, ins: list[str], **attrs: Any) -> str:
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, ins, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, res: int, stride: int = 1, act: bool = True) -> str:
        w = (self.rng.standard_normal((cout, cin, k, k)) / math.sqrt(cin * k * k)).astype(np.float32)
        y = self.op("Conv", [x, self.const(w, "w"), self.const(np.zeros(cout, np.float32), "b")],
                    kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride])
        self.flops += 2 * cin * cout * k * k * (res // stride) ** 2
        return self.op("Relu", [y]) if act else y


def _body(g: _G, x: str, size: int, ch: int, div: int, gflops: float, cin: int = 3) -> tuple[str, int]:
    res = size
    h = g.conv(x, cin, ch, 3, res)
    while res > size // div:
        h = g.conv(h, ch, ch, 3, res, stride=2)
        res //= 2
    per = 2 * ch * ch * 9 * res * res
    for _ in range(max(1, int(round((gflops * 1e9 - g.flops) / per)))):
        h = g.conv(h, ch, ch, 3, res)
    return h, res


def _image_head(g: _G, h: str, ch: int, res: int, out_size: int, out_ch: int, act: str) -> str:
    if out_size != res:
        h = g.op("Resize", [h, "", g.const(np.array([1, 1, out_size / res, out_size / res], np.float32))],
                 mode="nearest")
    y = g.conv(h, ch, out_ch, 3, out_size, act=False)
    return g.op(act, [y])


def _save(g: _G, path: Path, inputs: list, outputs: list[tuple[str, str, list]], extra_last: np.ndarray | None
          ) -> Path:
    nodes = list(g.nodes)
    outs = []
    for src, name, shape in outputs:
        nodes.append(helper.make_node("Identity", [src], [name]))
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    inits = list(g.inits)
    if extra_last is not None:
        inits.append(numpy_helper.from_array(extra_last, "emap"))
    graph = helper.make_graph(nodes, path.stem, inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="gpu_check")
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def _vi(name: str, shape: list[int]) -> Any:
    dims = [d if d > 0 else "batch" for d in shape]
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def build_standin(mid: str, spec: dict[str, Any], path: Path, *, smoke: bool) -> tuple[Path, float]:
    stage, gflops, ch, div = PIPELINE[mid]
    if smoke:
        gflops, ch = 0.001, 8
    g = _G(seed=len(mid))
    ins = spec["inputs"]
    if stage == "detect":
        size = int(spec["size"])
        h, res = _body(g, "input", size, ch, div, gflops)
        outs: list[tuple[str, str, list]] = []
        feats = {8: h}
        feats[16] = g.conv(h, ch, ch, 3, res, stride=2)
        feats[32] = g.conv(feats[16], ch, ch, 3, res // 2, stride=2)
        names = iter(str(400 + i) for i in range(9))
        for kind, width, bias in (("score", 1, -8.0), ("bbox", 4, 0.0), ("kps", 10, 0.0)):
            for s in (8, 16, 32):
                y = g.op("Conv", [feats[s], g.const((g.rng.standard_normal((2 * width, ch, 1, 1)) * 0.01)
                                                    .astype(np.float32)),
                                  g.const(np.full(2 * width, bias, np.float32))], kernel_shape=[1, 1])
                if kind == "score":
                    y = g.op("Sigmoid", [y])
                y = g.op("Transpose", [y], perm=[0, 2, 3, 1])
                y = g.op("Reshape", [y, g.const(np.array([-1, width], np.int64))])
                outs.append((y, next(names), [(size // s) ** 2 * 2, width]))
        return _save(g, path, [_vi("input", ins["input"]["shape"])], outs, None), g.flops
    if stage == "recognize":
        h, res = _body(g, "input", 112, ch, div, gflops)
        y = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
        y = g.op("MatMul", [y, g.const((g.rng.standard_normal((ch, 512)) / math.sqrt(ch)).astype(np.float32))])
        return _save(g, path, [_vi("input", ins["input"]["shape"])], [(y, "embedding", [-1, 512])], None), g.flops
    if stage == "swap":
        size = int(spec["size"])
        h, res = _body(g, "target", size, ch, div, gflops)
        src = g.op("MatMul", ["source", g.const((g.rng.standard_normal((512, ch)) * 0.01).astype(np.float32))])
        h = g.op("Add", [h, g.op("Reshape", [src, g.const(np.array([-1, ch, 1, 1], np.int64))])])
        y = _image_head(g, h, ch, res, size, 3, "Sigmoid")
        emap = g.rng.standard_normal((512, 512)).astype(np.float32) / math.sqrt(512)
        inputs = [_vi("target", ins["target"]["shape"]), _vi("source", ins["source"]["shape"])]
        return _save(g, path, inputs, [(y, "output", ins["target"]["shape"])], emap), g.flops
    if stage == "enhance":
        h, res = _body(g, "input", 512, ch, div, gflops)
        y = _image_head(g, h, ch, res, 512, 3, "Tanh")
        return _save(g, path, [_vi("input", ins["input"]["shape"])], [(y, "output", [1, 3, 512, 512])], None), g.flops
    if stage == "parse":
        h, res = _body(g, "input", 512, ch, div, gflops)
        y = _image_head(g, h, ch, res, 512, 19, "Identity")
        return _save(g, path, [_vi("input", ins["input"]["shape"])], [(y, "logits", [1, 19, 512, 512])], None), g.flops
    if stage == "occlude":
        x = g.op("Transpose", ["input"], perm=[0, 3, 1, 2])
        h, res = _body(g, x, 256, ch, div, gflops)
        y = _image_head(g, h, ch, res, 256, 1, "Sigmoid")
        y = g.op("Transpose", [y], perm=[0, 2, 3, 1])
        return _save(g, path, [_vi("input", ins["input"]["shape"])], [(y, "mask", [1, 256, 256, 1])], None), g.flops
    raise ValueError(mid)


# -- the check ---------------------------------------------------------------------------------------------------

def gpu_name() -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return "none (no nvidia-smi)"
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"


def prepare_models(work: Path, models_dir: Path | None, smoke: bool, log) -> tuple[Path, Path, dict[str, str]]:
    """A models folder and catalogue: real verified files where installed, stand-ins elsewhere."""
    from engine.models import catalogue, fetch, verify

    doc = json.loads(catalogue.CATALOGUE_PATH.read_text())
    entries = {e["id"]: e for e in doc["models"]}
    md = work / "models"
    md.mkdir(parents=True, exist_ok=True)
    origin: dict[str, str] = {}
    for mid in PIPELINE:
        e = entries[mid]
        real = None
        if models_dir is not None and not smoke:
            ent = catalogue.get(mid)
            p = fetch.installed_path(ent, models_dir)
            if p.is_file():
                try:
                    verify.verify_installed(ent, p, models_dir)
                    real = p
                except verify.HashMismatch as exc:
                    log(f"  {mid}: installed file fails its hash ({exc}); using a stand-in")
        dest = md / e["file"]
        if real is not None:
            os.symlink(real, dest)
            origin[mid] = f"real file {real}"
            continue
        t0 = time.perf_counter()
        _, flops = build_standin(mid, e["input"], dest, smoke=smoke)
        e["sha256"] = [hashlib.sha256(dest.read_bytes()).hexdigest()]
        e["size"], e["size_exact"] = dest.stat().st_size, True
        origin[mid] = f"stand-in {flops / 1e9:.1f} GFLOPs"
        log(f"  {mid}: built stand-in ({flops / 1e9:.1f} GFLOPs, {dest.stat().st_size / 1e6:.0f} MB) "
            f"in {time.perf_counter() - t0:.1f} s")
    cat = work / "catalogue.json"
    cat.write_text(json.dumps(doc))
    return md, cat, origin


def pipeline_fps(rt, frame_u8: np.ndarray, kps_list: list[np.ndarray], deadline: float, seconds: float,
                 log) -> dict[str, Any]:
    from engine.runtime.sessions import ModelSession
    from engine.stages import registry
    from engine.stages.align import paste_region, warp_back, warp_crops
    from engine.stages.contracts import SourceIdentity, SwapInput

    det = registry.create("detect", "scrfd_2.5g", rt)
    rec = registry.create("recognize", "arcface_w600k_r50", rt)
    sw = registry.create("swap", "inswapper_128", rt)
    enh = registry.create("enhance", "gfpgan_1.4", rt)
    par = registry.create("parse", "bisenet_resnet_34", rt)
    occ = registry.create("occlude", "xseg_1", rt)
    ident = SourceIdentity([], {rec.id: np.eye(512, dtype=np.float32)[0]}, "bench")
    stage_t: dict[str, float] = {k: 0.0 for k in ("detect", "embed", "swap", "enhance", "parse", "occlude", "paste")}

    def one_frame() -> None:
        t = time.perf_counter()
        det.detect(frame_u8)
        t1 = time.perf_counter()
        stage_t["detect"] += t1 - t
        from engine.stages.contracts import Face

        faces = [Face(box=np.r_[k.min(0), k.max(0)], score=1.0, kps5=k) for k in kps_list]
        rec.embed(frame_u8, faces)
        t2 = time.perf_counter()
        stage_t["embed"] += t2 - t1
        srgb = frame_u8.astype(np.float32) / 255.0
        crops, mats = warp_crops(srgb, kps_list, sw.template, sw.size)
        out = sw.swap(SwapInput(crops, [None] * len(crops), mats, np.ones(len(crops))), ident)
        t3 = time.perf_counter()
        stage_t["swap"] += t3 - t2
        big, bmats = warp_crops(srgb, kps_list, enh.template, enh.size)
        restored = enh.enhance(big)
        t4 = time.perf_counter()
        stage_t["enhance"] += t4 - t3
        par.regions(restored)
        t5 = time.perf_counter()
        stage_t["parse"] += t5 - t4
        occ.occlusion(crops)
        t6 = time.perf_counter()
        stage_t["occlude"] += t6 - t5
        result = srgb.copy()
        for c, m in zip(restored, bmats, strict=True):  # as the engine pastes: only the box each crop covers
            box = paste_region(m, c.shape[0], frame_u8.shape[:2])
            if box is not None:
                x0, y0, x1, y1 = box
                back = warp_back(c, m, box)
                result[y0:y1, x0:x1] = np.where(back > 0, back, result[y0:y1, x0:x1])
        stage_t["paste"] += time.perf_counter() - t6
        del out

    # Time inside the sessions' calls (inputs up, the graph, outputs down) apart from the host work around them.
    session_t: dict[str, float] = {}
    plain_run = ModelSession.run

    def timed_run(self, feeds, outputs=None):
        t = time.perf_counter()
        try:
            return plain_run(self, feeds, outputs)
        finally:
            session_t[self.model_id] = session_t.get(self.model_id, 0.0) + time.perf_counter() - t

    ModelSession.run = timed_run
    try:
        t0 = time.perf_counter()
        one_frame()  # warm-up: cuDNN algorithm search, TensorRT engines
        warm = time.perf_counter() - t0
        for k in stage_t:
            stage_t[k] = 0.0
        session_t.clear()
        frames = 0
        t0 = time.perf_counter()
        while frames < 3 or (time.perf_counter() - t0 < seconds and time.time() < deadline):
            one_frame()
            frames += 1
            if time.time() > deadline:
                log("  deadline reached: stopping the measurement")
                break
        elapsed = time.perf_counter() - t0
    finally:
        ModelSession.run = plain_run
    return {"frames": frames, "seconds": round(elapsed, 3), "fps": round(frames / elapsed, 3),
            "warmup_s": round(warm, 2), "faces_per_frame": len(kps_list),
            "stage_ms": {k: round(v / frames * 1000, 2) for k, v in stage_t.items()},
            "session_ms": {k: round(v / frames * 1000, 2) for k, v in session_t.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny graphs on CPU: checks the script itself")
    ap.add_argument("--models-dir", help="use real model files from this folder where installed")
    ap.add_argument("--seconds", type=float, default=60.0, help="fps measurement time")
    ap.add_argument("--budget", type=float, default=420.0, help="hard deadline for the whole check, seconds")
    ap.add_argument("--tensorrt", action="store_true", help="run the pipeline on TensorRT (engine build is slow)")
    ap.add_argument("--faces", type=int, default=2)
    ap.add_argument("--precision", choices=("auto", "fp32", "fp16", "tf32"), default="auto",
                    help="the runtime's precision (tf32: float32 on tensor cores, not frame-exact)")
    ap.add_argument("--out", help="write the result JSON here")
    ap.add_argument("--record", action="store_true", help="write the result into bench/RESULTS.md (issue 5 section)")
    ap.add_argument("--prepare", metavar="DIR", help="pipeline mode, on a machine with the engine's whole environment: "
                    "write the shots' tiles, shot analyses, source identity and waifu2x file to DIR")
    ap.add_argument("--pipeline", metavar="DIR", help="pipeline mode: run Engine.run on the shots --prepare wrote to "
                    "DIR, analysis and identity read from it (pipeline_mode.py)")
    ap.add_argument("--shots", default="2,6", help="pipeline mode: faces of the shots to prepare and run [2,6]")
    ap.add_argument("--variants", default="default,neural",
                    help="pipeline mode: default (embedded, geometric swapper) and/or neural (stand-in graphs) "
                         "[default,neural]")
    ap.add_argument("--providers", default="auto", help="pipeline mode: the engine's providers [auto]")
    args = ap.parse_args(argv)
    if args.prepare or args.pipeline:
        return pipeline_main(args)
    deadline = time.time() + args.budget
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(msg, flush=True)

    import onnxruntime as ort

    from engine.models import catalogue
    from engine.runtime import ProviderError, Runtime, providers
    from engine.stages import registry

    result: dict[str, Any] = {"mode": "cpu-smoke" if args.cpu_smoke else "gpu", "host": platform.node(),
                              "onnxruntime": ort.__version__, "available": providers.available(),
                              "gpu": gpu_name(), "checks": {}, "ok": True}
    log(f"onnxruntime {ort.__version__}; providers {result['available']}; GPU {result['gpu']}")
    if args.cpu_smoke:
        spec, size = "cpu", (640, 360)
        args.seconds = min(args.seconds, 2.0)
    else:
        if "cuda" not in result["available"]:
            log("FAIL: this onnxruntime has no CUDA provider (install onnxruntime-gpu); nothing to check")
            result["ok"] = False
            return _finish(result, args)
        spec = "tensorrt,cuda" if args.tensorrt else "cuda"
        size = (1920, 1080)
    work = Path(tempfile.mkdtemp(prefix="ff_gpu_check_"))
    try:
        md, cat, origin = prepare_models(work, Path(args.models_dir) if args.models_dir else None, args.cpu_smoke,
                                         log)
        result["models"] = origin
        os.environ[catalogue.ENV_CATALOGUE] = str(cat)
        registry.clear()
        rt = Runtime(providers_spec=spec, models_dir=md, cache_dir=work / "cache", max_batch=8,
                     precision=args.precision)
        for mid in PIPELINE:
            try:
                s = registry.create(PIPELINE[mid][0], mid, rt).session  # the session the pipeline uses (its head)
                ok = args.cpu_smoke or s.report.on_gpu
                result["checks"][mid] = {"providers": s.report.providers, "ok": ok, "warnings": s.report.warnings}
                log(f"  {'ok  ' if ok else 'FAIL'} {s.report.line()}")
                result["ok"] &= ok
            except ProviderError as exc:
                result["checks"][mid] = {"ok": False, "error": str(exc)}
                result["ok"] = False
                log(f"  FAIL {mid}: {exc}")
        if not args.cpu_smoke and not args.tensorrt and providers.tensorrt_libraries_present():
            probe = Runtime(providers_spec="tensorrt,cuda", models_dir=md, cache_dir=work / "cache")
            try:
                s = probe.session("arcface_w600k_r50")
                result["checks"]["tensorrt_probe"] = {"providers": s.report.providers,
                                                      "ok": s.report.provider == "tensorrt"}
                log(f"  TensorRT probe: {s.report.line()}")
            except ProviderError as exc:
                result["checks"]["tensorrt_probe"] = {"ok": False, "error": str(exc)}
                log(f"  TensorRT probe FAIL: {exc}")
        elif not args.cpu_smoke:
            result["checks"]["tensorrt_probe"] = {"ok": None, "note": "TensorRT libraries not installed"}
        if all(c.get("ok") is not False for k, c in result["checks"].items() if k in PIPELINE):
            w, h = size
            frame = (np.random.default_rng(0).uniform(40, 200, (h, w, 3))).astype(np.uint8)
            base = np.array([[0.38, 0.40], [0.62, 0.40], [0.50, 0.55], [0.40, 0.70], [0.60, 0.70]])
            side = h * 0.35
            kps = [base * side + [w * (0.2 + 0.5 * i / max(args.faces - 1, 1)), h * 0.25] for i in range(args.faces)]
            fps = pipeline_fps(rt, frame, kps, deadline, args.seconds, log)
            result["pipeline"] = {"frame": f"{w}x{h}", **fps}
            log(f"  pipeline {w}x{h}, {args.faces} faces: {fps['fps']} fps (warm-up {fps['warmup_s']} s); "
                f"per stage ms {fps['stage_ms']}; in session calls ms {fps['session_ms']}")
        result["reports"] = [r.to_dict() for r in rt.reports()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["total_s"] = round(time.perf_counter() - started, 1)
    return _finish(result, args)


def pipeline_main(args) -> int:
    """``--prepare DIR`` (here, full environment) or ``--pipeline DIR`` (the device machine): pipeline_mode.py."""
    from bench.gpu_check import pipeline_mode as pm

    started = time.perf_counter()
    shots = tuple(int(n) for n in args.shots.split(","))
    smoke = args.cpu_smoke
    if args.prepare:
        size, frames = ((640, 360), 4) if smoke else ((1920, 1080), 24)
        manifest = pm.prepare(Path(args.prepare), size=size, frames=frames, face_counts=shots)
        print(f"prepared {args.prepare} in {time.perf_counter() - started:.1f} s: shots {sorted(manifest['shots'])}")
        return 0
    folder = Path(args.pipeline)
    result: dict[str, Any] = {"mode": "pipeline" + (" cpu-smoke" if smoke else ""), "host": platform.node(),
                              "gpu": gpu_name(), "machine": pm.machine(), "runs": [], "ok": True,
                              "prepared": json.loads((folder / "manifest.json").read_text())}
    for shot in result["prepared"]["shots"].values():
        shot.pop("hashes", None)  # the check's business, not the record's
    print(f"pipeline mode on {result['gpu']}; {result['machine']}", flush=True)
    variants = [v for v in args.variants.split(",") if v]
    plan = [(n, v) for v in variants for n in shots]
    work = Path(tempfile.mkdtemp(prefix="ff_gpu_pipeline_"))
    # As bench/throughput.py: the bench's own consent store, audit log, signing chain and cache, never the user's.
    os.environ.update({"FACE_FUSION_CONSENT_FILE": str(work / "consent.json"),
                       "FACE_FUSION_CONSENT_ALL": "bench/gpu_check: a public test photo, internal benchmark",
                       "FACE_FUSION_AUDIT_LOG": str(work / "audit.jsonl"), "FACE_FUSION_C2PA_DIR": str(work / "c2pa"),
                       "FACE_FUSION_CACHE_DIR": str(work / "cache")})
    try:
        md = None
        if "neural" in variants:  # stand-ins (or nothing real: no model host there) plus the prepared waifu2x file
            md, cat, origin = prepare_models(work, None, smoke, lambda m: print(m, flush=True))
            for f in (folder / "models").iterdir():
                shutil.copyfile(f, md / f.name)
            os.environ["FACE_FUSION_CATALOGUE"] = str(cat)
            result["standins"] = origin
        for i, (n, variant) in enumerate(plan):
            left = args.budget - (time.perf_counter() - started)
            if left < 20:
                result["runs"].append({"faces": n, "variant": variant, "skipped": f"budget ({left:.0f} s left)"})
                continue
            try:
                run = pm.measure(folder, work, faces=n, variant=variant, providers=args.providers,
                                 budget_s=left / (len(plan) - i), models_dir=md if variant == "neural" else None,
                                 min_frames=2 if smoke else 3)
            except Exception as exc:  # noqa: BLE001 - one failed run is recorded, the others still run
                import traceback

                traceback.print_exc()
                run = {"faces": n, "variant": variant, "error": f"{type(exc).__name__}: {exc}"}
                result["ok"] = False
            result["runs"].append(run)
            if args.out:  # what is done so far survives a kill at the time limit
                Path(args.out).write_text(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["total_s"] = round(time.perf_counter() - started, 1)
    print(f"gpu_check pipeline: {'PASS' if result['ok'] else 'FAIL'} in {result['total_s']} s")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


def _finish(result: dict[str, Any], args) -> int:
    log_line = "PASS" if result["ok"] else "FAIL"
    print(f"gpu_check {result['mode']}: {log_line}" + (f" in {result.get('total_s')} s" if "total_s" in result else ""))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    if args.record:
        record(result)
    return 0 if result["ok"] else 1


def record(result: dict[str, Any]) -> None:
    """Replace the '## GPU check (issue 5)' section of bench/RESULTS.md with this run."""
    path = ROOT / "bench" / "RESULTS.md"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    head = "## GPU check (issue 5)"
    p = result.get("pipeline", {})
    body = [head, "", f"Run {time.strftime('%Y-%m-%d %H:%M')} on {result['gpu']} (onnxruntime {result['onnxruntime']}, "
            f"mode {result['mode']}): **{'PASS' if result['ok'] else 'FAIL'}**.", ""]
    for mid, c in result["checks"].items():
        body.append(f"- {mid}: {', '.join(c.get('providers', [])) or c.get('error') or c.get('note')}"
                    f" ({result.get('models', {}).get(mid, '')})")
    if p:
        body += ["", f"Neural pipeline at {p['frame']}, {p['faces_per_frame']} faces: **{p['fps']} fps** "
                 f"({p['frames']} frames in {p['seconds']} s, warm-up {p['warmup_s']} s). Per stage (ms): "
                 + ", ".join(f"{k} {v}" for k, v in p["stage_ms"].items()) + "; of which inside the model sessions' "
                 "calls (inputs to the device, the graph, outputs back): "
                 + ", ".join(f"{k} {v}" for k, v in p.get("session_ms", {}).items()) + "."]
    section = "\n".join(body) + "\n\n"
    if head in text:
        before, rest = text.split(head, 1)
        nxt = rest.find("\n## ")
        text = before + section + (rest[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
