"""A terminal progress bar fed by engine events: frames done, frames per second, time left."""

from __future__ import annotations

import sys
from typing import Any, TextIO


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
            label = "analysing" if event.get("stage") == "analyse" else "rendering"
            self.stream.write(f"\r{label} [{bar}] {done}/{event['total']}{extra}   ")
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
