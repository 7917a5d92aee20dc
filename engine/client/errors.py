"""What the engine client raises. All derive from ``EngineClientError``."""

from __future__ import annotations


class EngineClientError(Exception):
    """Base of everything this module raises."""


class EngineStartError(EngineClientError):
    """The engine process did not come up (bad Python, missing packages, no socket)."""


class EngineDied(EngineClientError):
    """The engine process or its connection is gone. ``restart()`` the client to go on."""


class EngineHung(EngineClientError):
    """The engine process is alive but has sent nothing (not even a heartbeat) for ``hung_after`` seconds:
    it is stuck. ``restart()`` the client (kills it, starts a fresh one) and submit again."""


class ProtocolMismatch(EngineClientError):
    """The engine speaks another protocol version: install matching add-on and engine."""


class RequestError(EngineClientError):
    """The engine refused a request; the message names the problem."""


class JobFailed(EngineClientError):
    """A job ended with an ``error`` event; the message is the engine's."""


class JobCancelledError(EngineClientError):
    """A job ended because it was cancelled."""

