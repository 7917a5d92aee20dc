"""Request fields of responsible use (issue 14): the consent a job carries, the ``consent`` kind (check, record or
revoke a confirmation for a source identity) and the ``sign`` kind (a C2PA manifest into files Blender rendered).

Standard library only: travels in the add-on with the rest of ``protocol``.
"""

from __future__ import annotations

import re
from typing import Any

from .messages import ProtocolError, str_field, type_name

MAX_RECORDS = 256  # consent records one job carries (a scene's source identities): far above any shot
MAX_SIGN_FILES = 100_000  # files one sign job covers (the frames of a long render)
MAX_EXRS_PER_FILE = 64  # Face Fusion EXRs one rendered file was made from (strips/nodes in the frame)
IDENTITY_RE = re.compile(r"^[0-9a-f]{64}$")
CONSENT_ACTIONS = ("check", "grant", "revoke")


def consent_records(msg: dict[str, Any]) -> list[dict[str, str]] | None:
    """The optional ``consent`` field: confirmations saved with a project ({identity, who, when, note}); None when
    the request carries none (the engine's own store decides alone)."""
    if msg.get("consent") is None:
        return None
    records = msg["consent"]
    if not isinstance(records, list):
        raise ProtocolError(f"field 'consent' must be a list of records, got {type_name(records)}")
    if len(records) > MAX_RECORDS:
        raise ProtocolError(f"too many consent records ({len(records)}); at most {MAX_RECORDS}")
    out = []
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise ProtocolError(f"consent[{i}] must be an object, got {type_name(rec)}")
        entry = {k: str_field(rec, k, max_len=2000) for k in ("identity", "who", "when", "note")}
        if not IDENTITY_RE.match(entry["identity"]):
            raise ProtocolError(f"consent[{i}]: 'identity' must be a source-identity hash (64 hex digits)")
        if not entry["note"].strip():
            raise ProtocolError(f"consent[{i}]: a consent needs a note")
        out.append(entry)
    return out


def parse_consent(msg: dict[str, Any], sources: list[dict[str, Any]]) -> dict[str, Any]:
    action = str_field(msg, "action", required=False, default="check", max_len=16)
    if action not in CONSENT_ACTIONS:
        raise ProtocolError(f"field 'action' must be one of {', '.join(CONSENT_ACTIONS)}, got {action!r}")
    out = {"sources": sources, "action": action, "note": str_field(msg, "note", required=False, default="",
                                                                    max_len=2000),
           "who": str_field(msg, "who", required=False, default="", max_len=256), "consent": consent_records(msg)}
    if action == "grant" and not out["note"].strip():
        raise ProtocolError("a consent needs a note: whose face, which release, which work")
    return out


def parse_sign(msg: dict[str, Any]) -> dict[str, Any]:
    """{output_dir, files: [{path, exrs}], software}: sign each file (under output_dir) with the provenance of the
    Face Fusion EXRs it was made from."""
    out_dir = str_field(msg, "output_dir")
    if not out_dir:
        raise ProtocolError("field 'output_dir' is empty")
    files = msg.get("files")
    if not isinstance(files, list) or not files:
        raise ProtocolError(f"field 'files' must be a non-empty list, got {type_name(files)}")
    if len(files) > MAX_SIGN_FILES:
        raise ProtocolError(f"too many files ({len(files)}); at most {MAX_SIGN_FILES} per sign job")
    checked = []
    for i, f in enumerate(files):
        if not isinstance(f, dict):
            raise ProtocolError(f"files[{i}] must be an object with 'path' and 'exrs', got {type_name(f)}")
        path = str_field(f, "path")
        exrs = f.get("exrs", [])
        if not path:
            raise ProtocolError(f"files[{i}]: 'path' is empty")
        if not isinstance(exrs, list) or len(exrs) > MAX_EXRS_PER_FILE or not all(isinstance(e, str) for e in exrs):
            raise ProtocolError(f"files[{i}]: 'exrs' must be a list of at most {MAX_EXRS_PER_FILE} paths")
        checked.append({"path": path, "exrs": exrs})
    return {"output_dir": out_dir, "files": checked,
            "software": str_field(msg, "software", required=False, default="", max_len=256)}
