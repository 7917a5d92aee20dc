"""The studio's policy file: what an artist's settings cannot change. JSON at $FACE_FUSION_POLICY, else
``policy.json`` in the per-user data folder; a missing file means no policy. Read strictly: a file that is not a
regular file, not JSON, or holds an unknown field or value refuses every render with the file and field named.

    {"watermark": "locked_on",              # the watermark setting cannot turn the mark off
     "blanket_consent": "forbidden",       # $FACE_FUSION_CONSENT_ALL is refused: every identity needs a stored one
     "signing_cert": "/studio/c2pa/chain.pem", "signing_key": "/studio/c2pa/key.pem"}   # C2PA signer
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.io import bounded_json
from engine.io.files import CLOEXEC, open_regular
from engine.models.catalogue import default_models_dir

ENV_POLICY = "FACE_FUSION_POLICY"


def policy_path() -> Path:
    value = os.environ.get(ENV_POLICY, "")
    return Path(value).expanduser() if value else default_models_dir().parent / "policy.json"


# Every field and the values it may take (None: a path, as text). Anything else refuses every render: a typo or a
# value of another type must never quietly mean "no policy" (fail closed).
FIELDS: dict[str, tuple[str, ...] | None] = {
    "watermark": ("locked_on", "artist"),          # artist: the setting decides (as without a policy)
    "blanket_consent": ("forbidden", "allowed"),
    "signing_cert": None, "signing_key": None,
    "audit_key": None,                            # the audit chain's key file (engine.audit_key)
}
MAX_BYTES = 1 << 20


def _refuse(path: Path, what: str) -> EngineError:
    return EngineError(f"the studio policy file {path} {what}; every render is refused until it is fixed",
                       f"fix the file (fields: {', '.join(FIELDS)}) or point ${ENV_POLICY} at a valid one")


def load() -> dict[str, Any]:
    """The policy, read strictly; {} only when no file (and no link) is at its path."""
    path = policy_path()
    if not os.path.lexists(path):
        return {}
    try:
        fd = open_regular(str(path), os.O_RDONLY | CLOEXEC)  # a FIFO or a folder is refused, never waited on
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({exc.strerror or exc})") from exc
    if len(raw) > MAX_BYTES:
        raise _refuse(path, f"is larger than {MAX_BYTES >> 10} kB")
    try:
        data = bounded_json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _refuse(path, f"is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise _refuse(path, f"is a JSON {type(data).__name__}, not an object")
    for key, value in data.items():
        if key not in FIELDS:
            raise _refuse(path, f"has an unknown field '{key}'")
        allowed = FIELDS[key]
        if allowed is None:
            if not isinstance(value, str) or not value.strip():
                raise _refuse(path, f"has '{key}' = {json.dumps(value)[:60]}, not a path")
        elif value not in allowed:
            raise _refuse(path, f"has '{key}' = {json.dumps(value)[:60]}, not one of "
                                + " or ".join(json.dumps(a) for a in allowed))
    return data


def watermark_locked() -> bool:
    return load().get("watermark") == "locked_on"


def blanket_consent_forbidden() -> bool:
    return load().get("blanket_consent") == "forbidden"
