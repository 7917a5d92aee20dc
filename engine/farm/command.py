"""``python -m engine analyse`` (a farm job's analysis task), the farm options of ``swap`` and
``python -m engine farm openjd|flamenco`` (job definitions with a shot's values).

Only argparse at import time: ``engine.cli`` imports this module for every command, ``--help`` included.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any


def add_swap_options(sw: argparse.ArgumentParser) -> None:
    sw.add_argument("--settings", metavar="FILE", help="JSON file of settings (flags given as well win over it)")
    sw.add_argument("--analysis", metavar="FILE",
                    help="farm render chunk: read the shot analysis 'analyse' wrote to FILE and never analyse (a "
                         "missing or stale FILE is an error, exit 2)")


def add_parsers(sub: Any, add_settings_options: Callable[[argparse.ArgumentParser], None]) -> None:
    an = sub.add_parser("analyse", help="analyse a plate once and write its shot analysis to a file (farm jobs)",
                        description="Analyse the whole plate (cuts, face tracks, identities, statistics) and write "
                                    "the shot analysis to FILE atomically; render chunks read it with "
                                    "'swap --analysis FILE'.")
    an.add_argument("--target", required=True, metavar="PLATE", help="plate: an image, a sequence or a movie file")
    an.add_argument("--analysis", required=True, metavar="FILE", help="where the analysis is written (.npz)")
    an.add_argument("--settings", metavar="FILE", help="JSON file of settings (flags given as well win over it)")
    an.add_argument("--quiet", action="store_true", help="no progress bar")
    an.add_argument("--providers", default="auto", help="execution providers for neural models [auto]")
    an.add_argument("--models-dir", default=None, help="models folder (default: $FACE_FUSION_MODELS_DIR)")
    add_settings_options(an)
    sub.add_parser("farm", help="write a farm job for a shot (see: farm --help)", add_help=False)


def swap_engine(args: argparse.Namespace, job: Any) -> Any:
    from engine.farm.chunk import swap_engine as make  # the pipeline: loaded by swap only

    return make(args.analysis, args.settings, job, models_dir=args.models_dir, providers=args.providers)


def analyse(args: argparse.Namespace, flags: dict[str, Any]) -> int:
    from engine.errors import EngineError
    from engine.farm.chunk import load_settings_file
    from engine.farm.shot_file import header, write
    from engine.io.plates import Plate
    from engine.job import ImageInput
    from engine.job_inputs import checked_settings, plate_input
    from engine.pipeline import Engine
    from engine.progress import ProgressPrinter

    folder = os.path.dirname(os.path.abspath(args.analysis))
    try:  # checked before minutes of analysis, not after
        os.makedirs(folder, exist_ok=True)
        writable = os.access(folder, os.W_OK | os.X_OK)
    except OSError:
        writable = False
    if not writable:
        raise EngineError(f"cannot write the shot analysis in '{folder}'",
                          "choose a folder on the shared storage that you can write to")
    values = {**(load_settings_file(args.settings) if args.settings else {}), **flags}
    s = checked_settings(values)
    plate = Plate(plate_input(ImageInput(path=args.target), s))
    printer = ProgressPrinter(quiet=args.quiet)
    try:
        analysis = Engine(models_dir=args.models_dir, providers=args.providers).shot_analysis(plate, s, printer)
        write(args.analysis, analysis, header(plate, s, args.analysis))
    finally:
        plate.close()
        printer.close()
    print(f"wrote the shot analysis of {len(analysis.frames)} frame(s), {len(analysis.tracks)} track(s), "
          f"{len(analysis.shot_starts)} shot(s) to {args.analysis}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine farm", description="Farm job definitions for a shot")
    sub = p.add_subparsers(dest="farm", required=True)
    from engine.farm import flamenco, openjd

    openjd.add_parser(sub)
    flamenco.add_parser(sub)
    args = p.parse_args(argv)
    from engine.errors import EngineError

    try:
        return args.run(args)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
