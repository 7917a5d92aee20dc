"""The studio's policy file: what an artist's settings cannot change. JSON at $FACE_FUSION_POLICY, else
``policy.json`` in the per-user data folder; a missing file means no policy.

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
from engine.models.catalogue import default_models_dir

ENV_POLICY = "FACE_FUSION_POLICY"


def policy_path() -> Path:
    value = os.environ.get(ENV_POLICY, "")
    return Path(value).expanduser() if value else default_models_dir().parent / "policy.json"


def load() -> dict[str, Any]:
    path = policy_path()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # a broken policy must not silently become no policy
        raise EngineError(f"the studio policy file {path} cannot be read ({exc})",
                          f"fix it or point ${ENV_POLICY} at a valid JSON file") from exc
    if not isinstance(data, dict):
        raise EngineError(f"the studio policy file {path} is not a JSON object", "fix the file")
    return data


def watermark_locked() -> bool:
    return load().get("watermark") == "locked_on"


def blanket_consent_forbidden() -> bool:
    return load().get("blanket_consent") == "forbidden"
