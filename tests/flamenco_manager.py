"""A local stand-in for Flamenco Manager's REST API, written from its OpenAPI description (Flamenco 3,
``pkg/api/flamenco-openapi.yaml``): the calls a job submission makes, with the request shapes checked.

- ``GET /api/v3/jobs/type/{typeName}`` (getJobType): an AvailableJobType ``{name, label, settings, etag}`` for an
  installed type, else 404 with an Error ``{code, message}`` ("no such job type known", as the Manager answers);
- ``POST /api/v3/jobs`` (submitJob): a SubmittedJob (required ``name``, ``type``, ``priority`` (integer),
  ``submitter_platform``; ``settings`` an object, ``metadata`` an object of strings, ``type_etag`` a string), else 400;
  a ``type_etag`` other than the type's etag gets 412; a compiled job comes back as a Job (the submitted fields plus
  ``id``, ``created``, ``updated``, ``status``, ``activity``, ``steps_completed``, ``steps_total``).

Stricter than the Manager where a mistake would otherwise pass unseen: unknown top-level fields, a missing required
setting of the job type and a non-JSON body are refused (400). ``fail_with`` makes it refuse every job with that
HTTP status and message (a Manager whose compiler throws answers 400 with the error text).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import uuid
from typing import Any

SUBMITTED_JOB = {"name": str, "type": str, "type_etag": str, "priority": int, "settings": dict, "metadata": dict,
                 "submitter_platform": str, "storage": dict, "worker_tag": str, "initial_status": str}
REQUIRED = ("name", "type", "priority", "submitter_platform")


class ManagerStandIn:
    """``with ManagerStandIn({"face-fusion-blender": JOB_TYPE}) as m: ... m.url ... m.jobs``"""

    def __init__(self, job_types: dict[str, dict[str, Any]], fail_with: tuple[int, str] | None = None) -> None:
        self.job_types = {name: {"name": name, "label": t.get("label", name), "description": t.get("description", ""),
                                 "settings": t.get("settings", []),
                                 "etag": hashlib.sha256(json.dumps(t, sort_keys=True).encode()).hexdigest()}
                          for name, t in job_types.items()}
        self.fail_with = fail_with
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.jobs: list[dict[str, Any]] = []  # the bodies of the jobs it accepted
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ManagerStandIn:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        manager = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                manager.requests.append(("GET", self.path))
                prefix = "/api/v3/jobs/type/"
                if not self.path.startswith(prefix):
                    return self._reply(404, _error(404, "not found"))
                job_type = manager.job_types.get(self.path[len(prefix):])
                self._reply(200, job_type) if job_type else self._reply(404, _error(404, "no such job type known"))

            def do_POST(self) -> None:  # noqa: N802
                manager.requests.append(("POST", self.path))
                if self.path != "/api/v3/jobs":
                    return self._reply(404, _error(404, "not found"))
                if self.headers.get("Content-Type", "").split(";")[0] != "application/json":
                    return self._reply(415, _error(415, "request body must be application/json"))
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                except ValueError:
                    return self._reply(400, _error(400, "invalid format"))
                status, answer = manager.submit(body)
                self._reply(status, answer)

            def _reply(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def submit(self, body: Any) -> tuple[int, dict[str, Any]]:
        problem = _shape_problem(body)
        if problem:
            return 400, _error(400, problem)
        job_type = self.job_types.get(body["type"])
        if job_type is None:
            return 400, _error(400, f"job type {body['type']!r} unknown")
        if body.get("type_etag") not in (None, "", job_type["etag"]):
            return 412, _error(412, "rejecting job because its settings are outdated, refresh the job type")
        settings = body.get("settings") or {}
        missing = [s["key"] for s in job_type["settings"] if s.get("required") and s["key"] not in settings]
        if missing:
            return 400, _error(400, f"job setting(s) {', '.join(missing)} missing")
        if self.fail_with:
            return self.fail_with[0], _error(*self.fail_with)
        self.jobs.append(body)
        return 200, {**body, "id": str(uuid.uuid4()), "created": "2026-01-01T00:00:00Z",
                     "updated": "2026-01-01T00:00:00Z", "status": body.get("initial_status") or "queued",
                     "activity": "", "steps_completed": 0, "steps_total": 0}


def _shape_problem(body: Any) -> str:
    if not isinstance(body, dict):
        return "a SubmittedJob must be a JSON object"
    unknown = sorted(set(body) - set(SUBMITTED_JOB))
    if unknown:
        return f"unknown SubmittedJob field(s) {', '.join(unknown)}"
    for key in REQUIRED:
        if key not in body:
            return f"SubmittedJob field {key!r} is required"
    for key, kind in SUBMITTED_JOB.items():
        if key in body and (not isinstance(body[key], kind) or isinstance(body[key], bool)):
            return f"SubmittedJob field {key!r} must be of type {kind.__name__}"
    if not all(isinstance(v, str) for v in (body.get("metadata") or {}).values()):
        return "JobMetadata values must be strings"
    return ""


def _error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}
