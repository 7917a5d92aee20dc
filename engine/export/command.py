"""``python -m engine export`` (EXRs -> signed PNG/JPEG/TIFF frames or an H.264 MP4) and ``python -m engine
provenance FILE`` (what a frame says about itself: EXR attributes, or C2PA manifest + validation + watermark)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

from engine.errors import EngineError
from engine.export import frames as fx
from engine.export import inputs
from engine.export.sign import manifest, sign_in_place
from engine.io.files import check_regular
from engine.job import parse_frames


def _exrs(folder: str, first: int | None, last: int | None) -> list[tuple[int, str]]:
    found = []
    for path in glob.glob(os.path.join(folder, "*.exr")):
        m = re.search(r"\.(-?\d+)\.exr$", path)
        if m and (first is None or int(m.group(1)) >= first) and (last is None or int(m.group(1)) <= last):
            found.append((int(m.group(1)), path))
    if not found:
        raise EngineError(f"no numbered EXRs in '{folder}' for that frame range", "give the render's output folder")
    return sorted(found)


def export_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine export",
                                description="export our EXRs to 8-bit sRGB deliverables with a signed C2PA manifest")
    p.add_argument("exr_dir", metavar="DIR", help="the render's output folder (facefusion.####.exr)")
    p.add_argument("--to", required=True, metavar="OUT",
                   help="out.####.png|jpg|tif (one file per frame, #### = frame) or out.mp4 (H.264)")
    p.add_argument("--frames", metavar="FIRST-LAST", help="frame range [all]")
    p.add_argument("--plate", metavar="PLATE", help="the plate, for face-layer EXRs (Alpha Over it)")
    p.add_argument("--quality", type=int, default=95, help="JPEG quality [95]")
    p.add_argument("--crf", type=int, default=18, help="H.264 constant rate factor [18]")
    p.add_argument("--fps", type=float, default=25.0, help="movie frame rate [25]")
    p.add_argument("--tune", choices=["grain", "film", "none"], default="grain",
                   help="x264 tuning: grain keeps fine detail and doubles the invisible watermark's evidence (files "
                        "~30 %% larger at CRF 23) [grain]")
    p.add_argument("--no-sign", action="store_true", help="write without a C2PA manifest")
    args = p.parse_args(argv)
    todo = _exrs(args.exr_dir, *parse_frames(args.frames))
    for _, path in todo:  # every frame checked before any is written
        attrs_of = inputs.exr_attributes(path, need_rgba=True)
        inputs.settings_of(attrs_of, path)
    attrs = inputs.exr_attributes(todo[0][1])
    face_layer = inputs.settings_of(attrs, todo[0][1]).get("output_mode") == "face"
    if face_layer and not args.plate:
        raise EngineError("these EXRs hold the face layer only", "pass --plate PLATE (the plate they were made from)")
    plate = None
    if args.plate:
        from engine.io.plates import Plate
        from engine.job import ImageInput

        plate = Plate(ImageInput(path=args.plate))

    def picture(frame: int, path: str):
        return fx.frame_srgb(path, plate.read(frame)[0] if plate is not None else None)

    outs: list[str] = []
    try:
        if args.to.lower().endswith(".mp4"):
            outs.append(fx.write_movie((picture(f, e) for f, e in todo), args.to, args.fps, args.crf, args.tune))
        else:
            if len(todo) > 1 and "####" not in args.to:
                raise EngineError("several frames need '####' in --to", "e.g. --to delivery/shot.####.png")
            for f, e in todo:
                outs.append(fx.write_image(picture(f, e), args.to.replace("####", f"{f:04d}"), args.quality))
    finally:
        if plate is not None:
            plate.close()
    problems = []
    if not args.no_sign:
        definition = manifest(attrs, os.path.basename(args.to), [todo[0][0], todo[-1][0]])
        problems = [msg for out in outs if (msg := sign_in_place(out, definition))]
    for msg in problems:
        print(f"warning: {msg}", file=sys.stderr)
    state = "unsigned" if args.no_sign else f"{len(outs) - len(problems)} signed"
    print(f"exported {len(outs)} file(s) ({state}) from frames {todo[0][0]}-{todo[-1][0]}: {outs[0]}"
          + (" ..." if len(outs) > 1 else ""))
    return 1 if problems else 0


def provenance_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine provenance", description="what a frame says about itself")
    p.add_argument("file")
    args = p.parse_args(argv)
    check_regular(args.file, "the file")
    if args.file.lower().endswith(".exr"):
        attrs = inputs.exr_attributes(args.file)
        mine = {k: v for k, v in sorted(attrs.items()) if k.startswith("facefusion:") or k == "Software"}
        if not mine:
            print(f"{args.file}: no Face Fusion provenance attributes")
        for k, v in mine.items():
            print(f"{k}: {v}")
        return 0
    found = inputs.manifest_of(args.file)
    if found is None:
        print("C2PA: no manifest (stripped, or never signed)")
    else:
        vr = (found.get("validation_results") or {}).get("activeManifest", {})
        failures = [f["code"] for f in vr.get("failure", [])]
        print(f"C2PA: validation {found['validation_state']}; failures: {', '.join(failures) or 'none'}"
              + (" (signed with the locally generated, untrusted chain)" if "signingCredential.untrusted" in failures
                 else ""))
        for a in found["manifest"].get("assertions", []):
            print(f"  {a['label']}: {json.dumps(a.get('data'), sort_keys=True)}")
    from engine.watermark.detect import FaceRegions, detect_file

    try:
        res = detect_file(args.file, FaceRegions()).as_dict()
    except (ValueError, OSError) as exc:  # damaged pixels: the manifest above still says what it can
        print(f"watermark: the pixels cannot be read ({exc})")
        return 0
    print(f"watermark: {'present, payload ' + res['payload'] if res['present'] else 'not found'} "
          f"({res['faces']} face(s), score {res['score']})")
    return 0
