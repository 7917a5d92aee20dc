"""The runners of responsible use (issue 14), with the same arguments as those in ``jobs.py``, which names them:

- ``run_consent``: the source identity of the request's photos (the engine's hash) and its confirmation; or
  record one (``action: grant``) or revoke it (``revoke``) in the engine's consent store;
- ``run_sign``: sign files Blender rendered with a C2PA manifest (``engine.export.render_sign``);
- ``carrying_consent``: wraps the render and preview runners so that they accept the confirmations the request
  carries (those saved with the .blend), and a preview, like a render, shows no face without one.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import consent
from ..job import ImageInput

Emit = Callable[[dict[str, Any]], None]


@dataclass
class FieldsOnly:
    """A result of JSON fields and no pixels (what the queue reads of ``jobs.JobOutput``; not imported from there,
    which imports this module)."""

    fields: dict[str, Any]
    layers: list[Any] = field(default_factory=list)


def carrying_consent(runner: Callable[..., Any], check: bool = False) -> Callable[..., Any]:
    """``runner`` with the request's consent records in force; ``check``: refuse first without a confirmation
    (the render pipeline checks by itself, before it writes anything)."""
    @functools.wraps(runner)
    def run(engines: Any, req: dict[str, Any], image: Any, sources: list[ImageInput], *args: Any) -> Any:
        with consent.given(req.get("consent")):
            if check:
                consent.require(consent.identity_digest(sources))
            return runner(engines, req, image, sources, *args)
    return run


def run_consent(engines: Any, req: dict[str, Any], image: Any, sources: list[ImageInput], settings: Any,
                emit: Emit, cancel: threading.Event) -> FieldsOnly:
    identity = consent.identity_digest(sources)
    with consent.given(req.get("consent")):
        if req["action"] == "grant":
            entry = {**consent.grant(identity, req["note"], req["who"] or None), "by": "store"}
        else:
            if req["action"] == "revoke":
                consent.revoke(identity, req["who"] or None, even_unknown=True)  # beats copies in .blend files
            entry = consent.lookup(identity)
    return FieldsOnly({"identity": identity, "consent": entry, "revoked": consent.revocation(identity)})


def run_sign(engines: Any, req: dict[str, Any], image: Any, sources: list[ImageInput], settings: Any,
             emit: Emit, cancel: threading.Event) -> FieldsOnly:
    from ..export.render_sign import sign_outputs  # c2pa and OpenImageIO: only when a sign job runs

    return FieldsOnly({"files": sign_outputs(req["output_dir"], req["files"], req["software"], cancel)})
