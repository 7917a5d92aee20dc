"""Submitting a job to Flamenco Manager through its REST API (Flamenco 3, ``pkg/api/flamenco-openapi.yaml``).

Two calls: ``GET /api/v3/jobs/type/{name}`` (the job type as the Manager has it installed; 404 when it is not) for
its ``etag``, then ``POST /api/v3/jobs`` with a SubmittedJob (name, type, priority, submitter_platform, settings,
metadata) carrying that etag as ``type_etag``, so a Manager whose job type changed in between answers 412 rather
than compiling the job with settings it does not know. A compiled job comes back as a Job (``id``, ``status``);
every failure is an ``{"code", "message"}`` Error object.

Standard library only: the add-on (Blender's Python) and ``python -m engine farm flamenco --manager`` share it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT_S = 15.0
SCRIPTS = {"face-fusion-blender": "face_fusion_blender.js", "face-fusion-engine": "face_fusion_engine.js"}


class ManagerError(RuntimeError):
    """The job was not submitted: ``what`` happened, ``todo`` says what to do."""

    def __init__(self, what: str, todo: str) -> None:
        super().__init__(f"{what}. {todo}")
        self.what, self.todo = what, todo


def submit(manager_url: str, job: dict[str, Any], timeout: float = TIMEOUT_S) -> dict[str, Any]:
    """Submit ``job`` (a SubmittedJob without ``type_etag``); returns the Manager's Job. Raises ManagerError."""
    base = manager_url.strip().rstrip("/")
    if urllib.parse.urlsplit(base).scheme not in ("http", "https") or not urllib.parse.urlsplit(base).netloc:
        raise ManagerError(f"'{manager_url}' is not a Flamenco Manager URL",
                           "give it as http://HOST:PORT, e.g. http://flamenco:8080")
    name = str(job["type"])
    job_type = _call(base, "GET", f"/api/v3/jobs/type/{urllib.parse.quote(name)}", None, timeout)
    if job_type.get("status") == 404:
        script = SCRIPTS.get(name, f"{name.replace('-', '_')}.js")
        raise ManagerError(f"the Flamenco Manager at {base} has no job type '{name}'",
                           f"copy packaging/flamenco/{script} into the 'scripts' folder next to flamenco-manager "
                           "and restart the Manager")
    _refused(base, "job type", job_type)
    etag = job_type["body"].get("etag") if isinstance(job_type["body"], dict) else None
    if not isinstance(etag, str):
        raise ManagerError(f"{base} answered the job type request without an etag: it is not a Flamenco 3 Manager",
                           "check the Manager URL")
    reply = _call(base, "POST", "/api/v3/jobs", {**job, "type_etag": etag}, timeout)
    if reply["status"] == 412:
        raise ManagerError(f"the Flamenco Manager at {base} changed its job type '{name}' during the submission",
                           "submit again")
    _refused(base, "job", reply)
    body = reply["body"]
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        raise ManagerError(f"{base} accepted the job but answered without its id", "look for it in the Manager")
    return body


def _call(base: str, method: str, path: str, doc: Any, timeout: float) -> dict[str, Any]:
    """{"status": HTTP status, "body": the JSON answer (or its text when it is not JSON)}; unreachable raises."""
    data = json.dumps(doc).encode() if doc is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Accept": "application/json", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ManagerError(f"cannot reach the Flamenco Manager at {base} ({reason})",
                           "check the Manager URL and that flamenco-manager is running") from exc
    text = raw.decode("utf-8", errors="replace")
    try:
        body: Any = json.loads(text) if text.strip() else {}
    except ValueError:
        body = text
    return {"status": status, "body": body}


def _refused(base: str, what: str, reply: dict[str, Any]) -> None:
    status, body = reply["status"], reply["body"]
    if 200 <= status < 300:
        return
    message = body.get("message") if isinstance(body, dict) else None
    detail = str(message if message else body).strip()[:300] or "no message"
    raise ManagerError(f"the Flamenco Manager at {base} refused the {what} (HTTP {status}: {detail})",
                       "fix what it names, or submit the job's JSON by hand")
