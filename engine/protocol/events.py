"""The one list of job event types: what the engine sends in ``{"kind": "event", "event": {"type": ...}}``.

The pipeline emits all but ``cancelled``; the server adds ``cancelled`` and sends exactly one terminal event
per job. Clients pass on types they do not know (a newer engine), so adding one here is compatible.
"""

from __future__ import annotations

# type -> the fields it carries (documentation for add-on, farm scripts and the engine's own emitters).
EVENT_TYPES: dict[str, str] = {
    "start": "total, frame_start, frame_end, skipped: the frames this render will write",
    "provider": "model, provider, precision, device_id, warnings, trust (how its file is trusted: a published "
                "sha256, or trusted on first use): what a neural model really runs on",
    "warning": "frame (or null), message",
    "frame_done": "frame, path, faces, seconds, confidence (per replaced face, Face1..N, in [0, 1]): one EXR "
                  "written",
    "progress": "stage (analyse | render), done, total (never going backwards); render also fps, eta (seconds or "
                "null); analyse also pass, passes, pass_name, pass_done, frames (frames of the shot read in this "
                "pass of the shot analysis)",
    "done": "seconds, result (render: frames, output_dir, models; preview/frame/analyse/echo: fields and layers)",
    "error": "message: one line naming the problem and what to do",
    "cancelled": "reason (optional)",
}
TERMINAL_EVENTS = ("done", "error", "cancelled")  # exactly one of these ends every job
