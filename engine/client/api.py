"""``EngineClient``: one connection to one engine, made of its parts (see ``engine.client``'s docstring)."""

from __future__ import annotations

from typing import Any

from .jobs import JobRequests
from .process import EngineProcess
from .requests import Requests
from .responsible import ResponsibleRequests


class EngineClient(EngineProcess, Requests, ResponsibleRequests, JobRequests):
    """A connection to one engine. Make it with ``start`` or ``connect``."""

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
