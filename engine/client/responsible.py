"""Responsible-use requests (issue 14): a source identity's consent, checked or recorded by the engine (which alone
computes the identity hash), and Content Credentials signed into files Blender rendered.

    eng.consent(sources=["/photos/actor.jpg"]).wait()    # {"identity": hash, "consent": record or None, "revoked"}
    eng.consent(sources=[...], action="grant", note="J. Doe, release 42, shot 10", who="artist").wait()
    eng.sign(output_dir="/renders", files=[{"path": "/renders/f_0001.png", "exrs": ["/cache/k/facefusion.0001.exr"]}],
             software="Blender 5.0.1").wait()           # {"files": [{"path", "state", "message"}]}

``consent=`` on both (and on ``render``/``preview``) hands over confirmations saved with a project.
"""

from __future__ import annotations

from typing import Any

from .handle import JobHandle
from .jobs import JobRequests, _carried


class ResponsibleRequests(JobRequests):
    def consent(self, sources: list[Any], action: str = "check", note: str = "", who: str = "",
                consent: list[dict[str, str]] | None = None) -> JobHandle:
        """The source identity of ``sources`` and its confirmation (``check``), or record one (``grant``)."""
        return self._submit_job("consent", lambda held: {
            "sources": [self._image(s, held, f"sources[{i}]") for i, s in enumerate(sources)], "action": action,
            "note": note, "who": who, **_carried(consent)})

    def sign(self, output_dir: str, files: list[dict[str, Any]], software: str = "") -> JobHandle:
        """Sign ``files`` ({path, exrs}, under ``output_dir``, an allowed output root of the engine) with a C2PA
        manifest naming the Face Fusion EXRs each was made from."""
        return self._submit_job("sign", lambda held: {"output_dir": output_dir, "files": files,
                                                      "software": software})
