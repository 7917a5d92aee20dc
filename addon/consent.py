"""Consent per source identity on the Blender side (issue 14).

Only the engine computes a source identity's hash (from the photos' pixels) and keeps confirmations in its store
(``engine/consent.py``). The add-on asks it (``check``) before the first bake or preview, records the artist's
confirmation through it (``grant``) and keeps a copy of each confirmation its scenes use in the .blend
(``scene.face_fusion_consent``). Every render and preview request carries those copies, so a headless render
(``blender -b``, a farm node) of a saved, consented scene works on a machine whose own store is empty, and one of an
unconsented scene stops with the engine's message, nothing written. The copies are records, not proof: they say
who confirmed what, when, as the engine's audit log and the EXRs' provenance then do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import bpy

from . import plates, session, sources
from .targets import Target

BY_STORE = "store"  # the engine found it in its own store: copied into the .blend so headless renders have it


class FaceFusionConsentRecord(bpy.types.PropertyGroup):
    """A confirmation that someone has the right to use a likeness for this work (saved with the .blend)."""

    identity: bpy.props.StringProperty(name="Source Identity", description="The engine's hash of the photos")
    who: bpy.props.StringProperty(name="Who")
    when: bpy.props.StringProperty(name="When")
    note: bpy.props.StringProperty(name="Note")


@dataclass
class Status:
    target: Target
    identity: str
    entry: dict[str, Any] | None  # the confirmation in force, or None
    revoked: dict[str, Any] | None  # the engine's store revoked it: {who, when}


def records(scene: Any) -> list[dict[str, str]]:
    """The confirmations saved with ``scene`` (what render and preview requests carry)."""
    return [{"identity": r.identity, "who": r.who, "when": r.when, "note": r.note}
            for r in getattr(scene, "face_fusion_consent", ()) if r.identity and r.note.strip()]


def keep(scene: Any, entry: dict[str, Any]) -> None:
    """Save ``entry`` with the scene (replacing an older one of the same identity). Main thread only."""
    coll = scene.face_fusion_consent
    rec = next((r for r in coll if r.identity == entry["identity"]), None) or coll.add()
    rec.identity, rec.who, rec.when, rec.note = (str(entry.get(k, "")) for k in ("identity", "who", "when", "note"))


def forget(scene: Any, identity: str) -> None:
    coll = scene.face_fusion_consent
    for i in reversed(range(len(coll))):
        if coll[i].identity == identity:
            coll.remove(i)


def _cache_root(target: Target) -> str:
    """A folder the engine may write to for this target (pixel sources travel through it)."""
    return os.path.dirname(target.output_dir(target.settings.cache_key or None)[1].rstrip("/\\"))


def check(target: Target) -> Status:
    """The target's source identity and its confirmation (the engine's store, the .blend's copy or, for tests and
    supervised batches, the engine's process-wide one)."""
    specs = sources.source_specs(target.settings)
    res = session.get(_cache_root(target)).consent(specs, records=records(target.scene))
    return Status(target, str(res["identity"]), res.get("consent"), res.get("revoked"))


def grant(target: Target, note: str, who: str) -> dict[str, Any]:
    """Record the confirmation through the engine (its store) and save it with the target's scene."""
    specs = sources.source_specs(target.settings)
    res = session.get(_cache_root(target)).consent(specs, action="grant", note=note, who=who)
    entry = dict(res["consent"])
    keep(target.scene, entry)
    return entry


def revoke(target: Target, who: str) -> str:
    """Withdraw the confirmation of the target's source identity: in the engine's store (recorded even where it
    held none, so that copies in other project files no longer count on this machine) and from the .blend."""
    specs = sources.source_specs(target.settings)
    res = session.get(_cache_root(target)).consent(specs, action="revoke", who=who)
    forget(target.scene, res["identity"])
    return str(res["identity"])


def unconfirmed(targets: list[Target]) -> list[Status]:
    """The targets whose source identity has no confirmation. A confirmation the engine found in its own store but
    the .blend lacks is copied into it on the way (main thread), so the saved file carries it to the farm."""
    missing, seen = [], set()
    for target in targets:
        status = check(target)
        if status.entry is None:
            if status.identity not in seen:
                missing.append(status)
                seen.add(status.identity)
        elif status.entry.get("by") == BY_STORE:
            if not any(r["identity"] == status.identity for r in records(target.scene)):
                keep(target.scene, status.entry)
    return missing


def source_names(target: Target) -> str:
    """The source photos' names, for the dialog."""
    try:
        specs = sources.source_specs(target.settings)
    except plates.PlateError as exc:
        return str(exc)
    return ", ".join(os.path.basename(s["path"]) if "path" in s else s["image"].name for s in specs)


def register() -> None:
    bpy.utils.register_class(FaceFusionConsentRecord)
    bpy.types.Scene.face_fusion_consent = bpy.props.CollectionProperty(type=FaceFusionConsentRecord)


def unregister() -> None:
    del bpy.types.Scene.face_fusion_consent
    bpy.utils.unregister_class(FaceFusionConsentRecord)
