"""Errors that reach the artist: each says what is wrong and what to do."""

from __future__ import annotations


class EngineError(Exception):
    """A job cannot run (or a frame cannot be made) because of its input or environment.

    ``str(err)`` is one line: what is wrong, then what to do about it.
    """

    def __init__(self, what: str, todo: str = "") -> None:
        self.what = what
        self.todo = todo
        super().__init__(f"{what}. {todo}".strip() if todo else what)


class JobCancelled(Exception):
    """The job was cancelled; no partial file is left behind."""
