"""The job kinds: one row per kind, read by the request parser, the engine's queue and the client.

A kind says which request fields it takes (``parse``), where the engine runs it (``lane``, and ``runner``:
the name of its function in ``engine/server/jobs.py``, named rather than referenced because this module
travels in the add-on, which has no pipeline), and what ``job.wait()`` returns on the client
(``build_result``). Nothing else branches on the kind.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .messages import (
    FILE_PREFIX_RE,
    MAX_SOURCES,
    ProtocolError,
    bool_field,
    check_image,
    int_field,
    str_field,
    type_name,
)
from .responsible import consent_records, parse_consent, parse_sign

FRAME_MIN, FRAME_MAX = -(1 << 31), 1 << 31
CLIP_ID_RE = re.compile(r"[0-9a-f]{32,64}")
MAX_RENDER_WORKERS = 64  # a job's render threads (engine.render_pool)
MAX_FRAMES_PER_JOB = 1_000_000  # 11.5 hours at 24 fps: far above any shot, far below what would exhaust memory


@dataclass
class PreviewFrame:
    """A preview as the client receives it: one frame swapped, not written to any file."""

    rgba: Any  # numpy float32 (H, W, 4), linear: what the EXR's RGBA would hold
    mattes: dict[str, Any] = field(default_factory=dict)  # float32 (H, W) each
    faces: int = 0
    warnings: list[str] = field(default_factory=list)
    window: bool = False  # a first look from a few frames' analysis (analysis_window), not the final pixels


Layers = dict[str, Any]  # layer name -> numpy array read from the result slot


@dataclass(frozen=True)
class JobKind:
    name: str
    parse: Callable[[dict[str, Any]], dict[str, Any]]  # the kind's own request fields, checked, defaults filled
    runner: str  # function name in engine/server/jobs.py
    build_result: Callable[[dict[str, Any], Layers], Any]  # (terminal "done" event, layers) -> wait()'s value
    lane: str = "interactive"  # "render": the render workers; "interactive": never waits behind a bake
    image: str = "plate"  # the request field holding the main image ("": none; sources, where given, are in "sources")
    settings: bool = True  # takes engine settings (validated against the schema)
    writes_files: bool = False  # has an output_dir, which must lie under an allowed output root
    pixels_back: bool = True  # the result carries pixels: the client may offer an out_slot for them


# ------------------------------------------------------------------------------------- request fields


def _settings(msg: dict[str, Any]) -> dict[str, Any]:
    settings = msg.get("settings", {})
    if not isinstance(settings, dict):
        raise ProtocolError(f"field 'settings' must be an object, got {type_name(settings)}")
    return settings


def _sources(msg: dict[str, Any], required: bool) -> list[dict[str, Any]]:
    if "sources" not in msg:
        if required:
            raise ProtocolError("missing field 'sources' (a list of source photos of the new identity)")
        return []
    sources = msg["sources"]
    if not isinstance(sources, list):
        raise ProtocolError(f"field 'sources' must be a list, got {type_name(sources)}")
    if len(sources) > MAX_SOURCES:
        raise ProtocolError(f"too many sources ({len(sources)}); at most {MAX_SOURCES}")
    return [check_image(s, f"sources[{i}]") for i, s in enumerate(sources)]


def _out_slot(msg: dict[str, Any]) -> str | None:
    return str_field(msg, "out_slot", required=False, nullable=True, max_len=64)


def _parse_render(msg: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"plate": check_image(msg.get("plate"), "plate"), "sources": _sources(msg, True)}
    out["output_dir"] = str_field(msg, "output_dir")
    if not out["output_dir"]:
        raise ProtocolError("field 'output_dir' is empty")
    out["settings"] = _settings(msg)
    for key in ("frame_start", "frame_end"):
        out[key] = int_field(msg, key, required=False, nullable=True, lo=FRAME_MIN, hi=FRAME_MAX)
    a, b = out["frame_start"], out["frame_end"]
    if a is not None and b is not None and b < a:
        raise ProtocolError(f"frame_end {b} is before frame_start {a}")
    if a is not None and b is not None and b - a + 1 > MAX_FRAMES_PER_JOB:
        raise ProtocolError(f"frames {a} to {b} are {b - a + 1} frames, more than the {MAX_FRAMES_PER_JOB} one "
                            "job may render; split it into several jobs")
    out["skip_existing"] = bool_field(msg, "skip_existing", False)
    # threads rendering the job's frames (engine.render_pool); null: one per core, shared with jobs side by side
    out["workers"] = int_field(msg, "workers", required=False, nullable=True, lo=1, hi=MAX_RENDER_WORKERS)
    prefix = str_field(msg, "file_prefix", required=False, default="facefusion", max_len=64)
    if not FILE_PREFIX_RE.match(prefix):
        raise ProtocolError(f"file_prefix {prefix!r} must be 1-64 letters, digits, '.', '_' or '-', "
                            "not starting with '.' or '-'")
    out["file_prefix"] = prefix
    out["consent"] = consent_records(msg)  # issue 14: the confirmations saved with the .blend
    out["analysis_file"] = _analysis_file(msg)  # issue 13: a farm chunk's shot analysis
    return out


def _analysis_file(msg: dict[str, Any]) -> str | None:
    """The shot analysis a farm job's analysis task wrote: the render reads it and never analyses (missing or stale:
    the job fails). Absolute, since the engine's working folder is not the client's."""
    path = str_field(msg, "analysis_file", required=False, nullable=True)
    if path and not os.path.isabs(path):
        raise ProtocolError(f"analysis_file {path!r} must be an absolute path")
    return path or None


def _parse_frame_job(msg: dict[str, Any], sources_required: bool) -> dict[str, Any]:
    return {"plate": check_image(msg.get("plate"), "plate"), "sources": _sources(msg, sources_required),
            "settings": _settings(msg), "frame": int_field(msg, "frame", lo=FRAME_MIN, hi=FRAME_MAX),
            "out_slot": _out_slot(msg), "consent": consent_records(msg)}


def _parse_preview(msg: dict[str, Any]) -> dict[str, Any]:
    """A frame job; ``analysis_window`` N > 0: where the shot has no analysis yet, look at the frames within N of it
    only (a first look, marked ``window`` in the result; not the final pixels)."""
    return {**_parse_frame_job(msg, True),
            "analysis_window": int_field(msg, "analysis_window", required=False, default=0, lo=0, hi=10_000)}


def _parse_host_frame(msg: dict[str, Any]) -> dict[str, Any]:
    """A compositing host's final frame (issue 37, the OpenFX plugin): pixels in, pixels back, audited."""
    out = _parse_frame_job(msg, True)
    out["host"] = str_field(msg, "host", required=False, default="", max_len=256)  # named in the audit line
    # the clip whose frames the engine holds (the "clip" kinds): the frame is rendered from its one shot analysis
    out["clip"] = _clip(msg, required=False)
    if out["clip"] is not None and not out["clip"]["first"] <= out["frame"] <= out["clip"]["last"]:
        raise ProtocolError(f"frame {out['frame']} is outside the clip's frames {out['clip']['first']} to "
                            f"{out['clip']['last']}")
    return out


def _clip(msg: dict[str, Any], required: bool = True) -> dict[str, Any] | None:
    """A host's clip (issue 37 item 5): {"id": hex digest of its frames, "first", "last", "width", "height"}."""
    ref = msg.get("clip")
    if ref is None and not required:
        return None
    if not isinstance(ref, dict):
        raise ProtocolError(f"field 'clip' must be an object with id, first, last, width and height, got "
                            f"{type_name(ref)}")
    clip_id = str_field(ref, "id", max_len=64)
    if not CLIP_ID_RE.fullmatch(clip_id):
        raise ProtocolError(f"clip id {clip_id!r} must be 32 to 64 lowercase hex digits")
    out: dict[str, Any] = {"id": clip_id}
    for key in ("first", "last"):
        out[key] = int_field(ref, key, lo=FRAME_MIN, hi=FRAME_MAX)
    for key in ("width", "height"):
        out[key] = int_field(ref, key, lo=1, hi=1 << 16)
    if out["last"] < out["first"] or out["last"] - out["first"] + 1 > MAX_FRAMES_PER_JOB:
        raise ProtocolError(f"clip frames {out['first']} to {out['last']} are no range of at most "
                            f"{MAX_FRAMES_PER_JOB} frames")
    return out


def _parse_clip_frame(msg: dict[str, Any]) -> dict[str, Any]:
    """One frame of a host's clip, into the engine's store of it."""
    out = {"clip": _clip(msg), "plate": check_image(msg.get("plate"), "plate"),
           "frame": int_field(msg, "frame", lo=FRAME_MIN, hi=FRAME_MAX)}
    if not out["clip"]["first"] <= out["frame"] <= out["clip"]["last"]:
        raise ProtocolError(f"frame {out['frame']} is outside the clip's frames {out['clip']['first']} to "
                            f"{out['clip']['last']}")
    if "slot" not in out["plate"]:
        raise ProtocolError("plate: a clip's frame is pixels in a slot, not a path")
    return out


def _parse_echo(msg: dict[str, Any]) -> dict[str, Any]:
    image = check_image(msg.get("image"), "image")
    if "slot" not in image:
        raise ProtocolError("image: echo needs pixels in a slot, not a path")
    return {"image": image, "out_slot": _out_slot(msg)}


# ------------------------------------------------------------------------------------------- results


def _preview_result(ev: dict[str, Any], layers: Layers) -> PreviewFrame:
    result = ev.get("result") or {}
    mattes = {k[len("matte."):]: v for k, v in layers.items() if k.startswith("matte.")}
    return PreviewFrame(rgba=layers["rgba"], mattes=mattes, faces=int(result.get("faces", 0)),
                        warnings=list(result.get("warnings", [])), window=bool(result.get("window", False)))


def _analyse_result(ev: dict[str, Any], layers: Layers) -> list[dict[str, Any]]:
    faces = []
    for face in (ev.get("result") or {}).get("faces", []):
        face = dict(face)
        thumb = face.pop("thumbnail_layer", None)
        if thumb is not None and thumb in layers:
            face["thumbnail"] = layers[thumb]
        faces.append(face)
    return faces


def _host_frame_result(ev: dict[str, Any], layers: Layers) -> dict[str, Any]:
    return {**(ev.get("result") or {}), "layers": layers}


def _fields_result(ev: dict[str, Any], _layers: Layers) -> dict[str, Any]:
    return dict(ev.get("result") or {})


JOB_KINDS: dict[str, JobKind] = {k.name: k for k in (
    JobKind("render", _parse_render, "run_render", lambda ev, _layers: ev, lane="render", writes_files=True,
            pixels_back=False),
    JobKind("preview", _parse_preview, "run_preview", _preview_result),
    JobKind("analyse", lambda m: _parse_frame_job(m, False), "run_analyse", _analyse_result),
    # A host's render is a deliverable (issue 37): the render lane, watermark, consent, audit line and provenance,
    # like "render", with the pixels back in a slot like "preview".
    JobKind("frame", _parse_host_frame, "run_frame", _host_frame_result, lane="render"),
    # A host clip's frames, handed over once for its one shot analysis (issue 37 item 5): "clip" says which frames
    # the engine lacks, "clip_frame" stores one. Never behind a render: the render waiting on them needs them.
    JobKind("clip", lambda m: {"clip": _clip(m)}, "run_clip", _fields_result, image="", settings=False,
            pixels_back=False),
    JobKind("clip_frame", _parse_clip_frame, "run_clip_frame", _fields_result, settings=False, pixels_back=False),
    # A source photo checked before a bake: the faces found, which is used (JSON fields, no pixels).
    JobKind("source_faces", lambda m: {"sources": _sources(m, True)}, "run_source_faces", _fields_result, image="",
            pixels_back=False),
    JobKind("echo", _parse_echo, "run_echo", lambda _ev, layers: layers["rgba"], image="image", settings=False),
    # Responsible use (issue 14): no main image; results are JSON fields. "sign" writes into Blender's output folder.
    JobKind("consent", lambda m: parse_consent(m, _sources(m, True)), "run_consent", _fields_result, image="",
            settings=False, pixels_back=False),
    JobKind("sign", parse_sign, "run_sign", _fields_result, image="", settings=False, writes_files=True,
            pixels_back=False),
)}
