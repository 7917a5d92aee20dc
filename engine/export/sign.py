"""C2PA Content Credentials for our deliverables (c2pa-python, offline). The manifest says what a frame is: a
composite whose face was made by an algorithm (IPTC digital source type: compositeWithTrainedAlgorithmicMedia when
a trained swapper made it, compositeSynthetic for the built-in geometric warp), by which engine and models, from
which source identity (its hash, never the photo), with the render id, watermark payload and audit line."""

from __future__ import annotations

import io
import json
import os
from typing import Any

from engine import __version__
from engine.export.certs import chain_and_key
from engine.io import atomic, bounded_json

IPTC = "http://cv.iptc.org/newscodes/digitalsourcetype/"
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".tif": "image/tiff",
        ".tiff": "image/tiff", ".mp4": "video/mp4"}
BUILTIN_SWAPPERS = ("geometric",)


def source_type(attrs: dict[str, str]) -> str:
    try:
        settings = bounded_json.loads(attrs.get("facefusion:settings", "{}"))
    except ValueError:
        settings = {}
    swapper = settings.get("swapper", "geometric") if isinstance(settings, dict) else "geometric"
    return IPTC + ("compositeSynthetic" if swapper in BUILTIN_SWAPPERS else "compositeWithTrainedAlgorithmicMedia")


def manifest(attrs: dict[str, str], title: str, frames: list[int]) -> dict[str, Any]:
    """The manifest definition of a deliverable made from EXRs whose (first) provenance attributes are ``attrs``."""
    def parsed(key: str) -> Any:
        return json_attr(attrs, key)
    agent = {"name": "Face Fusion engine", "version": attrs.get("facefusion:engine_version", __version__)}
    dst = source_type(attrs)
    step = {"action": "c2pa.converted", "softwareAgent": agent,
            "description": "exported from scene-linear OpenEXR to 8-bit sRGB"}
    return definition(title, dst, agent, step, {
        "digital_source_type": dst,
        "engine_version": attrs.get("facefusion:engine_version", ""),
        "models": parsed("facefusion:models"), "source_identity": attrs.get("facefusion:source_identity", ""),
        "render_id": attrs.get("facefusion:render_id", ""), "watermark": parsed("facefusion:watermark"),
        "audit_line": attrs.get("facefusion:audit_line", ""), "consent": parsed("facefusion:consent"),
        "settings": parsed("facefusion:settings"), "plate": attrs.get("facefusion:plate", ""),
        "frames": f"{frames[0]}-{frames[-1]}" if frames else ""})  # a list would be stored as bytes


def json_attr(attrs: dict[str, str], key: str, default: str = "null") -> Any:
    """An EXR attribute that holds JSON, decoded; its raw text when it is not JSON (older engines)."""
    try:
        return bounded_json.loads(attrs.get(key, default))
    except ValueError:
        return attrs.get(key)


def definition(title: str, dst: str, agent: dict[str, str], step: dict[str, Any], provenance: dict[str, Any]
               ) -> dict[str, Any]:
    """A manifest definition: the face created by Face Fusion (source type ``dst``), then ``step`` (what made the
    file from our frames), and our provenance assertion."""
    return {
        "claim_generator_info": [agent],
        "title": title,
        "assertions": [
            {"label": "c2pa.actions.v2", "data": {"actions": [
                {"action": "c2pa.created", "digitalSourceType": dst, "softwareAgent": agent,
                 "description": "face replaced by Face Fusion (synthetic face composited over a plate)"},
                step,
            ]}},
            {"label": "org.facefusion.provenance", "data": provenance},
        ],
    }


def sign_in_place(path: str, definition: dict[str, Any]) -> str | None:
    """Embed a signed manifest into the file at ``path`` (replaced atomically). Returns None, or why it could
    not be signed (the unsigned file is then left as it was)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in MIME:
        return f"C2PA does not cover '{ext}' files"
    try:
        import c2pa

        chain, key, _studio = chain_and_key()
        info = c2pa.C2paSignerInfo(b"es256", chain, key, None)
        with c2pa.Signer.from_info(info) as signer, c2pa.Builder(json.dumps(definition)) as builder, \
                open(path, "rb") as src, atomic.atomic_file(path) as dst:  # never written through a link
            builder.sign(signer, MIME[ext], src, dst)
    except Exception as exc:  # c2pa raises its own C2paError family; the unsigned file stays
        return f"{path} was written but not signed ({type(exc).__name__}: {exc})"
    return None


def read_manifest(path: str) -> dict[str, Any] | None:
    """The active manifest, validation state and results of a signed file; None when it has no manifest."""
    import c2pa

    ext = os.path.splitext(path)[1].lower()
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        with c2pa.Reader(MIME.get(ext, ""), io.BytesIO(data)) as reader:
            store = json.loads(reader.json())
    except Exception as exc:  # no manifest at all is an error in the reader
        if "ManifestNotFound" in type(exc).__name__ or "not found" in str(exc).lower():
            return None
        raise
    active = store.get("manifests", {}).get(store.get("active_manifest", ""), {})
    return {"validation_state": store.get("validation_state"), "validation_results": store.get("validation_results"),
            "validation_status": store.get("validation_status"), "manifest": active}
