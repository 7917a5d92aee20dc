"""The consent dialog (issue 14): before the first bake or preview of a source identity without a confirmation,
the artist says who confirms and why they have the right to use this likeness for this work. OK records it through
the engine and in the .blend, then the bake or preview goes on; declining (OK without the confirmation ticked) stops
it with a report, nothing rendered. Closing the dialog leaves the job unstarted (the panel says why).

Bake and Preview ask through ``ask`` from their ``invoke`` (UI only: scripts, ``-b`` and farms have no dialog; the
engine refuses there with its own message, and the confirmation saved with the .blend is what they use)."""

from __future__ import annotations

import getpass
import json
from typing import Any

import bpy

from . import consent, lookup, plates, session, source_faces
from .op_common import OwnerOp
from .targets import Target

THEN = [("NONE", "Nothing", "Only record the confirmation"), ("BAKE", "Bake", "Bake once confirmed"),
        ("PREVIEW", "Preview", "Preview the frame once confirmed")]
UNSET = -(1 << 30)
FAILURES = (plates.PlateError, session.EngineUnavailable, session.EngineLost, session.EngineJobError, OSError)


def interactive(context: Any) -> bool:
    """Whether a dialog can be shown (a window, not background). A function, so tests can take the UI path."""
    return context.window is not None and not bpy.app.background


def open_dialog(**props: Any) -> Any:
    """Show the dialog (Blender calls its invoke). A function, so tests can drive the invoke as Blender would."""
    return bpy.ops.facefusion.consent("INVOKE_DEFAULT", **props)


def ask(context: Any, then: str, report: Any = None, **props: Any) -> set[str] | None:
    """From Bake's/Preview's invoke: None when every source identity of the targets is confirmed (go on), else the
    dialog is shown (it goes on once confirmed) and the caller returns what this returns. A source photo without a
    usable face is refused first (``report``: the operator's), so no confirmation is asked for it."""
    if not interactive(context):
        return None
    try:
        targets = lookup.named_targets(context, props.get("strip_name", ""), props.get("node_name", ""),
                                       props.get("all_targets", False))
        refused = source_faces.refusal(targets)
        if refused:
            for target in targets:
                target.settings.last_report, target.settings.last_report_level = refused, "ERROR"
            if report is not None:
                report({"ERROR"}, refused)
            return {"CANCELLED"}
        missing = consent.unconfirmed(targets)
    except FAILURES:  # the job itself reports what is wrong
        return None
    if not missing:
        return None
    for status in missing:
        status.target.settings.last_report = "Face Fusion: waiting for the consent for this source identity"
        status.target.settings.last_report_level = "WARNING"
    open_dialog(then=then, identities=_identities(missing), **props)
    return {"CANCELLED"}  # this bake/preview does nothing; the dialog starts it again once confirmed


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def _identities(missing: list[consent.Status]) -> str:
    return json.dumps([{"identity": s.identity, "label": s.target.label, "photos": consent.source_names(s.target),
                        "revoked": s.revoked} for s in missing])


class FACEFUSION_OT_consent(bpy.types.Operator):
    """Confirm that you have the right to use this likeness for this work (saved with the .blend)"""

    bl_idname = "facefusion.consent"
    bl_label = "Face Fusion: Consent for This Likeness"

    strip_name: bpy.props.StringProperty(options={"SKIP_SAVE"})
    node_name: bpy.props.StringProperty(options={"SKIP_SAVE"})
    all_targets: bpy.props.BoolProperty(options={"SKIP_SAVE"})
    frame_start: bpy.props.IntProperty(default=UNSET, options={"SKIP_SAVE"})
    frame_end: bpy.props.IntProperty(default=UNSET, options={"SKIP_SAVE"})
    then: bpy.props.EnumProperty(items=THEN, default="NONE", options={"SKIP_SAVE"})
    identities: bpy.props.StringProperty(options={"HIDDEN", "SKIP_SAVE"})
    who: bpy.props.StringProperty(name="Who Confirms", description="Your name (recorded with the confirmation)")
    note: bpy.props.StringProperty(
        name="Note", options={"SKIP_SAVE"},
        description="Whose face, which release or permission, which work (e.g. 'J. Doe, release 2026-11-02, shot 42')")
    confirm: bpy.props.BoolProperty(
        name="I have the right to use this likeness for this work", default=False, options={"SKIP_SAVE"})

    def _targets(self, context: Any) -> list[Target]:
        return lookup.named_targets(context, self.strip_name, self.node_name, self.all_targets)

    def invoke(self, context: Any, event: Any) -> set[str]:
        if not self.identities:
            try:
                missing = consent.unconfirmed(self._targets(context))
            except FAILURES as exc:
                self.report({"ERROR"}, f"Face Fusion: {exc}")
                return {"CANCELLED"}
            if not missing:  # the panel's button, with nothing left to confirm
                self.report({"INFO"}, "Face Fusion: consent is recorded for every source identity here")
                return {"FINISHED"}
            self.identities = _identities(missing)
        self.who = self.who or _user()
        return context.window_manager.invoke_props_dialog(self, width=520)

    def draw(self, context: Any) -> None:
        col = self.layout.column()
        col.label(text="Confirm that you have the right to use this likeness for this work.", icon="USER")
        for item in json.loads(self.identities or "[]"):
            col.label(text=f"{item['label']}: {item['photos']} (source identity {item['identity'][:12]})")
            if item.get("revoked"):
                col.label(text=f"Consent was revoked on {item['revoked'].get('when', '?')}", icon="ERROR")
        col.prop(self, "who")
        col.prop(self, "note")
        col.prop(self, "confirm")
        col.label(text="Saved with the .blend; renders record it in the audit log and the frames' provenance.")

    def execute(self, context: Any) -> set[str]:
        try:
            targets = self._targets(context)
        except plates.PlateError as exc:
            self.report({"ERROR"}, f"Face Fusion: {exc}")
            return {"CANCELLED"}
        if not self.confirm or not self.note.strip():
            return self._declined(targets)
        try:
            missing = consent.unconfirmed(targets)
            for status in missing:
                entry = consent.grant(status.target, self.note, self.who)
                status.target.settings.last_report = f"Face Fusion: consent recorded by {entry['who']}"
                status.target.settings.last_report_level = "INFO"
                self.report({"INFO"}, f"Face Fusion: consent for source identity {entry['identity'][:12]} recorded "
                                      f"by {entry['who']} ({entry['note']}); saved with the .blend")
        except FAILURES as exc:
            self.report({"ERROR"}, f"Face Fusion: consent not recorded: {exc}")
            return {"CANCELLED"}
        self._go_on(context)
        return {"FINISHED"}

    def _declined(self, targets: list[Target]) -> set[str]:
        why = "the confirmation was not ticked" if not self.confirm else "a note is needed (whose face, which work)"
        text = f"Face Fusion: consent not given ({why}): nothing was rendered"
        for target in targets:
            target.settings.last_report, target.settings.last_report_level = text, "ERROR"
        self.report({"ERROR"}, text)
        return {"CANCELLED"}

    def _go_on(self, context: Any) -> None:
        """Start the job the dialog was asked for (modal in the UI, blocking in scripts)."""
        mode = "INVOKE_DEFAULT" if interactive(context) else "EXEC_DEFAULT"
        owner = {"strip_name": self.strip_name, "node_name": self.node_name}
        if self.then == "BAKE":
            bpy.ops.facefusion.bake(mode, **owner, all_targets=self.all_targets, frame_start=self.frame_start,
                                    frame_end=self.frame_end)
        elif self.then == "PREVIEW":
            bpy.ops.facefusion.preview(mode, **owner)


class FACEFUSION_OT_consent_revoke(OwnerOp, bpy.types.Operator):
    """Withdraw the consent for this strip's/node's source identity: its renders and previews stop until it is
    confirmed again (removed from the .blend, recorded as revoked in the engine's store)"""

    bl_idname = "facefusion.consent_revoke"
    bl_label = "Revoke Consent"

    def invoke(self, context: Any, event: Any) -> set[str]:
        return context.window_manager.invoke_confirm(self, event)

    def execute(self, context: Any) -> set[str]:
        owner = self.owner(context)
        if owner is None:
            return {"CANCELLED"}
        target = lookup.target_of(owner)
        who = _user()  # recorded with the revocation
        try:
            identity = consent.revoke(target, who)
        except FAILURES as exc:
            self.report({"ERROR"}, f"Face Fusion: consent not revoked: {exc}")
            return {"CANCELLED"}
        text = f"Face Fusion: consent for source identity {identity[:12]} revoked: renders of it stop"
        target.settings.last_report, target.settings.last_report_level = text, "WARNING"
        self.report({"WARNING"}, text)
        return {"FINISHED"}


def draw_state(layout: Any, target: Target) -> None:
    """The panel's lines: the confirmations saved with this .blend, and a button to give one now."""
    saved = consent.records(target.scene)
    col = layout.column(align=True)
    if not saved:
        col.label(text="Consent: asked at the first Bake or Preview", icon="INFO")
    for rec in saved[:3]:
        col.label(text=f"Consent: {rec['who']}, {rec['when'][:10]}: {rec['note']}", icon="CHECKMARK")
    if len(saved) > 3:
        col.label(text=f"... and {len(saved) - 3} more source identities")
    row = col.row(align=True)
    setattr(row.operator("facefusion.consent", text="Confirm Consent...", icon="USER"), target.owner_arg,
            target.owner.name)
    if saved:
        setattr(row.operator("facefusion.consent_revoke", text="Revoke", icon="X"), target.owner_arg,
                target.owner.name)


CLASSES = (FACEFUSION_OT_consent, FACEFUSION_OT_consent_revoke)


def register() -> None:
    consent.register()
    for cls in CLASSES:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
    consent.unregister()
