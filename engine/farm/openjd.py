"""``python -m engine farm openjd``: a job bundle for one shot from the project's Open Job Description template.

The bundle folder gets the template (``template.yaml``), its parameter values for ``openjd run -p file://...``
(``parameters.json``, a flat map) and for AWS Deadline Cloud job bundles (``parameter_values.json``), and a
settings file when none was given. Every path is made absolute here: workers see the submitting machine's paths
and map them with the farm's path-mapping rules.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.io import atomic

ROOT = Path(__file__).resolve().parents[2]  # the folder that holds engine/ and packaging/
TEMPLATE = ROOT / "packaging" / "openjd" / "face-fusion.yaml"
ANALYSIS_NAME = "face-fusion.analysis.npz"  # the template's name for the analysis next to the output


def add_parser(sub: Any) -> None:
    p = sub.add_parser("openjd", help="write an Open Job Description job bundle for a shot",
                       description="Write the Open Job Description template with this shot's parameter values "
                                   "into a bundle folder; run it with 'openjd run' or submit it to Deadline Cloud.")
    add_shot_options(p)
    p.add_argument("--bundle", required=True, metavar="DIR", help="folder for the job bundle (created)")
    p.set_defaults(run=write_bundle)


def add_shot_options(p: argparse.ArgumentParser, python: str = sys.executable, root: str = str(ROOT)) -> None:
    """The shot's values, shared by every farm's job writer (``python`` and ``root``: the workers' defaults)."""
    p.add_argument("--source", required=True, metavar="DIR", help="folder with the photos of the new face")
    p.add_argument("--target", required=True, metavar="PLATE", help="plate: a movie, an image or a sequence "
                                                                     "(plate.####.exr)")
    p.add_argument("--output", required=True, metavar="DIR", help="output folder on the shared storage")
    p.add_argument("--frames", metavar="FIRST-LAST", help="frames to render (default: the whole plate)")
    p.add_argument("--chunk-size", type=int, default=16, help="frames per render task [16]")
    p.add_argument("--settings", metavar="FILE", help="JSON settings file (default: an empty one, the defaults)")
    p.add_argument("--python", default=python, help=f"the engine's Python on the workers [{python}]")
    p.add_argument("--engine-folder", default=root, help=f"folder holding engine/ on the workers [{root}]")
    p.add_argument("--models-dir", default=None, help="models folder on the workers [this engine's]")
    p.add_argument("--consent-file", default=None, metavar="FILE",
                   help="the shot's consent store, on shared storage [$FACE_FUSION_CONSENT_FILE or this user's]")


def shot_values(args: argparse.Namespace, settings_dir: str) -> dict[str, Any]:
    """The template's parameter values for the shot the options describe (checked: bad input fails here, on
    the artist's machine, not on the farm)."""
    from engine.farm.chunk import expand_sources, load_settings_file
    from engine.io.plates import Plate
    from engine.job import ImageInput, parse_frames
    from engine.models.catalogue import models_dir

    source = os.path.abspath(args.source)
    if not os.path.isdir(source):
        raise EngineError(f"the source '{args.source}' is not a folder",
                          "put the photos of the new face in a folder of their own and pass that folder")
    sources = expand_sources([ImageInput(path=source)])  # refuses a folder without photos
    if args.chunk_size < 1:
        raise EngineError(f"chunk size {args.chunk_size} is not a frame count", "pass --chunk-size 1 or more")
    plate_path = os.path.abspath(args.target)
    plate = Plate(ImageInput(path=plate_path))
    try:
        first, last = parse_frames(args.frames)
        lo, hi = plate.frames[0], plate.frames[-1]
    finally:
        plate.close()
    first, last = (lo if first is None else first), (hi if last is None else last)
    if not lo <= first <= last <= hi:
        raise EngineError(f"frame range {first}-{last} is not inside the plate's frames {lo}-{hi}",
                          f"choose frames between {lo} and {hi}")
    consent_file = _consented(sources, args.consent_file)
    if args.settings:
        settings = os.path.abspath(args.settings)
        load_settings_file(settings)  # refuses a bad file now
    else:
        settings = os.path.join(settings_dir, "settings.json")
        atomic.write_text(settings, "{}\n")
    output = os.path.abspath(args.output)
    os.makedirs(output, exist_ok=True)
    return {"SourcePhotos": source, "PlateFolder": os.path.dirname(plate_path),
            "PlateName": os.path.basename(plate_path), "OutputFolder": output, "SettingsFile": settings,
            "FrameStart": first, "FrameEnd": last, "ChunkSize": args.chunk_size,
            "EnginePython": args.python, "EngineFolder": args.engine_folder,
            "ModelsFolder": str(models_dir(args.models_dir).resolve()), "ConsentFile": consent_file}


def _consented(sources: list[Any], consent_file: str | None) -> str:
    """The consent store the workers read, once it confirms the source identity: a job whose renders would all
    stop on the farm is refused here."""
    from engine import consent

    path = os.path.abspath(consent_file) if consent_file else str(consent.store_path().resolve())
    old = os.environ.get(consent.ENV_FILE)
    os.environ[consent.ENV_FILE] = path
    try:
        consent.require(consent.identity_digest(sources))
    except EngineError as exc:
        what = exc.what.replace(": nothing was rendered", "")
        raise EngineError(f"{what} in the consent store {path} that the farm job's workers read",
                          f"with FACE_FUSION_CONSENT_FILE={path}: {exc.todo}") from exc
    finally:
        if old is None:
            os.environ.pop(consent.ENV_FILE, None)
        else:
            os.environ[consent.ENV_FILE] = old
    return path


def write_bundle(args: argparse.Namespace) -> int:
    if not TEMPLATE.is_file():
        raise EngineError(f"the job template {TEMPLATE} is missing", "run from a full checkout of the project")
    bundle = os.path.abspath(args.bundle)
    os.makedirs(bundle, exist_ok=True)
    args.engine_folder = os.path.abspath(args.engine_folder)
    values = shot_values(args, bundle)
    atomic.copy_file(TEMPLATE, os.path.join(bundle, "template.yaml"))
    write_json(os.path.join(bundle, "parameters.json"), values)
    write_json(os.path.join(bundle, "parameter_values.json"),
                {"parameterValues": [{"name": k, "value": v} for k, v in values.items()]})
    # Quoted for the shell: a path holding $(...), quotes or spaces is pasted as itself, never run.
    template, params = os.path.join(bundle, "template.yaml"), "file://" + os.path.join(bundle, "parameters.json")
    print(f"wrote the job bundle {bundle}; run it here with:\n"
          f"  openjd run {shlex.quote(template)} --step Render --run-dependencies -p {shlex.quote(params)}\n"
          f"or submit the folder to Deadline Cloud ({shlex.join(['deadline', 'bundle', 'submit', bundle])})")
    return 0


def write_json(path: str, doc: Any) -> None:
    atomic.write_text(path, json.dumps(doc, indent=2) + "\n")
