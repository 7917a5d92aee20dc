"""Command line: ``python -m engine swap | demo | serve | models``.

The swap options are derived from the settings schema (engine/settings.py), so the CLI, the add-on and the
server can never disagree about a setting's name, range or default.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine import (  # responsible: watermark, audit, consent, export, provenance (issue 14)
    __version__,
    render_pool,  # --workers: threads per job
    responsible,
)
from engine import settings as schema
from engine.errors import EngineError, JobCancelled
from engine.farm import command as farm  # analyse, farm, swap --analysis/--settings: render farms (issue 13)
from engine.job import ImageInput, SwapJob, parse_frames

ALIASES = {"face_selector": ["--selector"], "temporal_smoothing": ["--smoothing"]}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_settings_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("settings (defaults in brackets)")
    for s in schema.SCHEMA:
        flags = [_flag(s.name)] + ALIASES.get(s.name, [])
        help_text = s.description
        if s.kind == "bool":
            g.add_argument(*flags, dest=s.name, action=argparse.BooleanOptionalAction, default=None,
                           help=f"{help_text} [{'on' if s.default else 'off'}]")
        elif s.kind == "enum":
            choices = "; ".join(f"{v}: {d}" for v, d in s.choices)
            g.add_argument(*flags, dest=s.name, choices=[c[0] for c in s.choices], default=None,
                           help=f"{help_text}. {choices} [{s.default}]")
        else:
            typ = {"int": int, "float": float, "str": str}[s.kind]
            rng = f" ({s.min}..{s.max})" if s.min is not None and s.max is not None else ""
            g.add_argument(*flags, dest=s.name, type=typ, default=None, help=f"{help_text}{rng} [{s.default}]")
    g.add_argument("--composite", dest="output_mode", action="store_const", const="composite",
                   help="write the full composited frame instead of the face layer (same as --output-mode composite)")


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    return {s.name: getattr(args, s.name) for s in schema.SCHEMA if getattr(args, s.name, None) is not None}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description="Face Fusion engine")
    p.add_argument("--version", action="version", version=f"Face Fusion engine {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    sw = sub.add_parser("swap", help="replace faces in a plate and write one EXR per frame",
                        description="Replace faces in a plate; writes <output>/facefusion.####.exr, each with a "
                                    "premultiplied face layer (or the composite) and matte layers FaceMatte.A, "
                                    "Face1.A, ...")
    sw.add_argument("--source", action="append", required=True, metavar="PHOTO",
                    help="photo of the new face; repeat for several photos of one person: averaged into one "
                         "identity, and the built-in swap paints each face with the photo turned most like it")
    sw.add_argument("--target", required=True, metavar="PLATE",
                    help="plate: an image, a sequence (plate.####.exr or plate.%%04d.png) or a movie file")
    sw.add_argument("--output", required=True, metavar="DIR", help="folder for the EXRs (created if missing)")
    sw.add_argument("--frames", metavar="FIRST-LAST", help="frame range to render (default: the whole plate)")
    sw.add_argument("--source-colorspace", default="auto", help="colour space of the source photos [auto]")
    sw.add_argument("--workers", type=int, default=None, metavar="N",
                    help="frames rendered at once, one thread each [one per core]")
    sw.add_argument("--skip-existing", action="store_true", help="do not recompute frames whose EXR exists")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.add_argument("--providers", default="auto",
                    help="execution providers for neural models: auto (TensorRT, CUDA, CPU as available), cpu, cuda, "
                         "tensorrt, or a comma list; a GPU provider asked for and not loaded is an error [auto]")
    sw.add_argument("--models-dir", default=None, help="models folder (default: $FACE_FUSION_MODELS_DIR or the "
                                                       "per-user data folder)")
    add_settings_options(sw)
    farm.add_swap_options(sw)
    responsible.add_swap_options(sw)
    farm.add_parsers(sub, add_settings_options)

    dm = sub.add_parser("demo", help="build a shot from real photos, swap it, write EXRs and a contact sheet")
    dm.add_argument("--output", default="demo_out", help="folder for the demo's files [demo_out]")
    dm.add_argument("--frames", type=int, default=8, help="length of the demo shot [8]")
    dm.add_argument("--quiet", action="store_true")

    sub.add_parser("serve", help="run the long-lived engine server (see: serve --help)", add_help=False)
    sub.add_parser("models", help="list, fetch, verify and import models (see: models --help)", add_help=False)
    sub.add_parser("quality", help="render a plate and write a quality report (see: quality --help)", add_help=False)
    responsible.add_parsers(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Each command imports only what it runs (numpy, OpenCV, onnxruntime stay out of `models list` and `--help`).
    if argv and argv[0] == "serve":
        from engine.server import main as serve_main

        return serve_main(argv[1:])
    if argv and argv[0] == "models":
        from engine.models.command import main as models_main

        return models_main(argv[1:])
    if argv and argv[0] == "quality":
        from engine.quality.report import main as quality_main

        return quality_main(argv[1:])
    if argv and argv[0] == "farm":
        return farm.main(argv[1:])
    if argv and argv[0] in responsible.COMMANDS:
        return responsible.main(argv)
    args = build_parser().parse_args(argv)
    try:
        if args.command == "swap":
            return _swap(args)
        if args.command == "analyse":
            return farm.analyse(args, settings_from_args(args))
        if args.command == "demo":
            from engine.demo import run_demo

            return run_demo(args.output, args.frames, quiet=args.quiet)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except JobCancelled:
        print("cancelled", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted: finished frames are kept, no partial file was left", file=sys.stderr)
        return 130
    return 0


def _swap(args: argparse.Namespace) -> int:
    from engine.progress import ProgressPrinter

    start, end = parse_frames(args.frames)
    job = SwapJob(
        sources=[ImageInput(path=s, colorspace=args.source_colorspace) for s in args.source],
        plate=ImageInput(path=args.target, colorspace=getattr(args, "colorspace", None) or "auto"),
        output_dir=args.output,
        settings=settings_from_args(args),
        frame_start=start,
        frame_end=end,
        skip_existing=args.skip_existing,
        workers=render_pool.checked_workers(args.workers),
    )
    responsible.before_swap(args, job)
    printer = ProgressPrinter(quiet=args.quiet)
    summary = farm.swap_engine(args, job).run(job, printer)
    printer.close()
    print(f"wrote {summary['frames']} frame(s) to {summary['output_dir']} in {summary['seconds']:.1f} s")
    return 0
