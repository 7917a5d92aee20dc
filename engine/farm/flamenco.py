"""``python -m engine farm flamenco``: a Flamenco job of the type ``face-fusion-engine``
(``packaging/flamenco/face_fusion_engine.js``) for one shot, written as the JSON Flamenco Manager's REST API takes
(``POST /api/v3/jobs``) and, given ``--manager URL``, submitted (``flamenco_api``: the job type checked first).

The engine's Python and folder default to the Manager's two-way variables ``{facefusion_python}`` and
``{facefusion_root}``; every path is made absolute on this machine and ``submitter_platform`` says which platform
they are written for, so the Manager maps them for each worker.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from engine.errors import EngineError
from engine.farm import flamenco_api
from engine.farm.openjd import add_shot_options, shot_values, write_json

JOB_TYPE = "face-fusion-engine"  # Flamenco names a job type after its script file, '_' read as '-'


def add_parser(sub: Any) -> None:
    p = sub.add_parser("flamenco", help="write (and optionally submit) a Flamenco job for a shot",
                       description="Write the Flamenco job for a shot (job type face-fusion-engine) as JSON; with "
                                   "--manager, submit it to that Flamenco Manager.")
    add_shot_options(p, python="{facefusion_python}", root="{facefusion_root}")
    p.add_argument("--job", required=True, metavar="FILE", help="where the job's JSON is written")
    p.add_argument("--name", default=None, help="job name [the plate's name]")
    p.add_argument("--manager", metavar="URL", help="Flamenco Manager to submit to, e.g. http://flamenco:8080")
    p.set_defaults(run=write_job)


def job_document(args: argparse.Namespace, settings_dir: str) -> dict[str, Any]:
    v = shot_values(args, settings_dir)
    frames = f"{v['FrameStart']}-{v['FrameEnd']}"
    return {
        "name": args.name or f"Face Fusion {v['PlateName']} {frames}",
        "type": JOB_TYPE,
        "priority": 50,
        "submitter_platform": sys.platform if sys.platform != "win32" else "windows",
        "settings": {"source_photos": v["SourcePhotos"], "plate": os.path.join(v["PlateFolder"], v["PlateName"]),
                     "output": v["OutputFolder"], "settings_file": v["SettingsFile"], "frames": frames,
                     "chunk_size": v["ChunkSize"], "engine_python": v["EnginePython"],
                     "engine_root": v["EngineFolder"], "models_dir": args.models_dir or "",
                     "consent_file": v["ConsentFile"]},
        "metadata": {"user.name": os.environ.get("USER") or os.environ.get("USERNAME") or ""},
    }


def write_job(args: argparse.Namespace) -> int:
    path = os.path.abspath(args.job)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc = job_document(args, os.path.dirname(path))
    write_json(path, doc)
    if not args.manager:
        print(f"wrote the Flamenco job {path}; submit it with:\n  curl -X POST -H 'Content-Type: application/json' "
              f"--data {shlex.quote('@' + path)} http://MANAGER:8080/api/v3/jobs")  # pasted as itself
        return 0
    try:
        reply = flamenco_api.submit(args.manager, doc)
    except flamenco_api.ManagerError as exc:
        raise EngineError(exc.what, f"{exc.todo}; the job's JSON is {path}") from exc
    print(f"submitted job {reply.get('id', '?')} ({doc['name']}) to {args.manager}; its JSON is in {path}")
    return 0
