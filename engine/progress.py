"""Progress events of the shot analysis, and a terminal progress bar fed by engine events (frames done, frames per
second, time left)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

# The shot analysis's passes over the plate, in order (engine.analysis.compute), as the artist reads them.
ANALYSIS_PASSES = ("finding shot cuts", "finding faces", "measuring faces")


def analysis_progress(pass_index: int, pass_done: int, frames: int, passes: int = len(ANALYSIS_PASSES),
                      name: str | None = None) -> dict[str, Any]:
    """The analysis's progress event: ``pass_done`` of the shot's ``frames`` read in pass ``pass_index`` (1-based)
    of ``passes``. ``done``/``total`` count every pass together, so a client's percent never goes backwards when a
    pass ends; ``pass_done``/``frames``/``pass_name`` let it say where the analysis is in frames of the shot."""
    return {"type": "progress", "stage": "analyse", "done": (pass_index - 1) * frames + pass_done,
            "total": passes * frames, "pass": pass_index, "passes": passes,
            "pass_name": name or ANALYSIS_PASSES[pass_index - 1], "pass_done": pass_done, "frames": frames}


class ProgressPrinter:
    def __init__(self, quiet: bool = False, stream: TextIO | None = None, width: int = 30) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.width = width
        self._line = False

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "provider":
            self._end_line()
            warn = f" WARNING: {'; '.join(event['warnings'])}" if event.get("warnings") else ""
            print(f"model {event['model']} runs on {event['provider']} ({event['precision']}){warn}",
                  file=self.stream)
        elif kind == "warning":
            self._end_line()
            print(f"warning: {event['message']}", file=self.stream)
        elif kind == "progress" and not self.quiet:
            done, total = event["done"], max(event["total"], 1)
            filled = int(self.width * done / total)
            bar = "#" * filled + "-" * (self.width - filled)
            extra = ""
            if event.get("stage") == "render" and event.get("fps"):
                eta = event.get("eta")
                extra = f" {event['fps']:.2f} fps" + (f", {_hms(eta)} left" if eta is not None else "")
            if event.get("stage") == "analyse" and "frames" in event:  # frames of the shot, and which pass
                label = f"analysing: {event['pass_name']} ({event['pass']}/{event['passes']})"
                count = f"{event['pass_done']}/{event['frames']}"
            else:
                label = "analysing" if event.get("stage") == "analyse" else "rendering"
                count = f"{done}/{event['total']}"
            self.stream.write(f"\r{label} [{bar}] {count}{extra}   ")
            self.stream.flush()
            self._line = True

    def _end_line(self) -> None:
        if self._line:
            self.stream.write("\n")
            self._line = False

    def close(self) -> None:
        self._end_line()


def _hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
