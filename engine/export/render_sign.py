"""Content Credentials for the files Blender renders from a scene with Face Fusion strips or nodes (the add-on's
``sign`` job, issue 14). Each PNG, JPEG, TIFF or MP4 gets a signed C2PA manifest that declares the face synthetic
and lists the Face Fusion renders it was made from (engine, models, source identity hash, render id, watermark,
consent, audit line), read from the attributes of the EXRs the strips/nodes showed. Files C2PA cannot carry (EXR:
its provenance is in the Face Fusion EXRs' attributes) are skipped with a note; a file that cannot be signed is
left exactly as it was, and the result says why."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from engine import __version__
from engine.export.sign import IPTC, MIME, definition, json_attr, sign_in_place, source_type

TRAINED = IPTC + "compositeWithTrainedAlgorithmicMedia"
RENDER_KEYS = ("source_identity", "render_id", "engine_version", "audit_line", "plate")
JSON_KEYS = ("models", "watermark", "consent")


def exr_attributes(path: str) -> dict[str, str]:
    """The string attributes of an EXR's header (no pixels read); {} when it cannot be opened."""
    import OpenImageIO as oiio

    inp = oiio.ImageInput.open(path)
    if inp is None:
        return {}
    try:
        return {a.name: a.value for a in inp.spec().extra_attribs if isinstance(a.value, str)}
    finally:
        inp.close()


def _render_entry(attrs: dict[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {k: attrs.get(f"facefusion:{k}", "") for k in RENDER_KEYS}
    for k in JSON_KEYS:
        entry[k] = json_attr(attrs, f"facefusion:{k}")
    settings = json_attr(attrs, "facefusion:settings", "{}")
    entry["swapper"] = settings.get("swapper", "") if isinstance(settings, dict) else ""
    return entry


def render_manifest(sources: list[dict[str, str]], title: str, software: str) -> dict[str, Any]:
    """The manifest of one rendered file made from EXRs whose attributes are ``sources`` (one per distinct render)."""
    dst = TRAINED if any(source_type(a) == TRAINED for a in sources) else source_type(sources[0])
    engine = {"name": "Face Fusion engine", "version": sources[0].get("facefusion:engine_version", __version__)}
    host = {"name": software or "Blender"}
    renders = {}
    for attrs in sources:
        entry = _render_entry(attrs)
        renders.setdefault(entry["render_id"] or json.dumps(entry, sort_keys=True), entry)
    step = {"action": "c2pa.edited", "softwareAgent": host,
            "description": "rendered by Blender from a scene holding the Face Fusion frames"}
    return definition(title, dst, engine, step, {"digital_source_type": dst, "engine_version": engine["version"],
                                                 "rendered_by": host["name"], "renders": list(renders.values())})


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([os.path.realpath(path), folder]) == folder
    except ValueError:  # another drive (Windows)
        return False


def sign_outputs(output_dir: str, files: list[dict[str, Any]], software: str = "",
                 cancel: threading.Event | None = None) -> list[dict[str, Any]]:
    """Sign each {path, exrs} under ``output_dir`` (the server checked it against its allowed roots). Per file:
    {path, state: signed | skipped | failed, message}."""
    cache: dict[str, dict[str, str]] = {}
    out = []
    for f in files:
        path = f["path"]
        if cancel is not None and cancel.is_set():
            out.append({"path": path, "state": "skipped", "message": f"{path}: not signed (cancelled)"})
            continue
        ext = os.path.splitext(path)[1].lower()
        if ext not in MIME:
            out.append({"path": path, "state": "skipped", "message": f"{os.path.basename(path)}: C2PA cannot carry "
                        f"'{ext}' files; the Face Fusion EXRs keep the provenance as attributes"})
            continue
        if not _inside(path, output_dir) or not os.path.isfile(path):
            out.append({"path": path, "state": "failed", "message": f"{path} is not a file in {output_dir}"})
            continue
        sources = []
        for exr in f["exrs"]:
            if exr not in cache:
                cache[exr] = exr_attributes(exr) if os.path.isfile(exr) else {}
            if cache[exr].get("facefusion:render_id") or cache[exr].get("facefusion:source_identity"):
                sources.append(cache[exr])
        if not sources:
            out.append({"path": path, "state": "failed", "message": f"{path} was written but not signed (none of "
                        "its Face Fusion EXRs could be read for their provenance)"})
            continue
        problem = sign_in_place(path, render_manifest(sources, os.path.basename(path), software))
        out.append({"path": path, "state": "failed" if problem else "signed", "message": problem or ""})
    return out
