"""``python -m engine serve``: the long-lived engine that Blender (and farm scripts) talk to.

Modules: ``connections`` (one client's connection and its sender thread), ``client_slots`` (slots per
client), ``queue`` (jobs: submission, lanes, workers, terminal events), ``jobs`` (what each job kind runs),
``app`` (the ``Server``: life cycle, accept and read loops, dispatch), ``cli`` (the command line).
"""

from __future__ import annotations

from .app import HEARTBEAT_S, Server
from .cli import build_parser, main
from .connections import ClientConn, Refused
from .queue import Job

__all__ = ["HEARTBEAT_S", "ClientConn", "Job", "Refused", "Server", "build_parser", "main"]
