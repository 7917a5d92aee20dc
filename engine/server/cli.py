"""``python -m engine serve``: the command line of the long-lived engine that Blender (and farm scripts) talk to."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from .. import transport
from .app import Server

DEFAULT_MAX_SLOT_BYTES = 2 << 30  # 2 GiB: an 8K RGBA float32 frame with mattes fits
DEFAULT_MAX_CLIENT_BYTES = 16 << 30
DEFAULT_MAX_CLIENT_SLOTS = 64
MIN_KEY_BYTES = 16


def _read_line_fd0() -> bytes:
    """One line from fd 0, unbuffered, so nothing after it is swallowed (the stdin watcher reads on)."""
    out = bytearray()
    while len(out) < 4096:
        ch = os.read(0, 1)
        if not ch or ch == b"\n":
            break
        out += ch
    return bytes(out)


def _read_key(opts: argparse.Namespace) -> bytes:
    if opts.key_stdin:
        line = _read_line_fd0().strip()
        try:
            return _long_enough(bytes.fromhex(line.decode("ascii")), "--key-stdin: the key on stdin's first line")
        except ValueError:
            raise SystemExit("--key-stdin: the first line of stdin must be the key in hex") from None
    env = os.environ.pop(transport.ENV_KEY, "")
    if env:
        try:
            return _long_enough(bytes.fromhex(env), f"${transport.ENV_KEY}")
        except ValueError:
            raise SystemExit(f"{transport.ENV_KEY} must be the key in hex") from None
    return os.urandom(32)


def _long_enough(key: bytes, what: str) -> bytes:
    """An empty or short key would let anyone who guesses it drive the engine: refuse to serve with it."""
    if len(key) < MIN_KEY_BYTES:
        raise SystemExit(f"{what} is {len(key)} bytes; the engine needs at least {MIN_KEY_BYTES} random bytes "
                         f"({2 * MIN_KEY_BYTES} hex digits)")
    return key


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine serve",
                                description="Run the long-lived engine that the Blender add-on talks to.")
    p.add_argument("--socket-dir", help="private directory for the socket and engine.json "
                   "(created with mode 0700; default: $XDG_RUNTIME_DIR or the temp dir + /facefusion-<uid>)")
    p.add_argument("--address", help="explicit socket path (Windows: pipe name); default: in --socket-dir")
    p.add_argument("--idle-timeout", type=float, default=0.0,
                   help="exit after this many seconds without clients or jobs (0: never)")
    p.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    p.add_argument("--remove-socket-dir", action="store_true",
                   help="remove --socket-dir at exit when it is empty (a folder its starter made for this engine)")
    p.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches EOF (the starter died)")
    p.add_argument("--key-stdin", action="store_true",
                   help=f"read the hex authkey from stdin's first line (else ${transport.ENV_KEY}, else random; "
                   "it is written to engine.json in the socket directory, never shown on a command line)")
    p.add_argument("--models-dir", help="where model files live")
    p.add_argument("--device", default="cpu", help="execution device for the pipeline (cpu, cuda, ...)")
    p.add_argument("--allowed-output-root", action="append", default=[],
                   help="render output folders must be under one of these (repeatable; default: home and temp)")
    p.add_argument("--render-workers", type=int, default=1, help="renders that run at the same time")
    p.add_argument("--max-slot-bytes", type=int, default=DEFAULT_MAX_SLOT_BYTES)
    p.add_argument("--max-client-bytes", type=int, default=DEFAULT_MAX_CLIENT_BYTES)
    p.add_argument("--max-client-slots", type=int, default=DEFAULT_MAX_CLIENT_SLOTS)
    p.add_argument("--log-level", default="WARNING")
    return p


def main(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    logging.basicConfig(level=opts.log_level.upper(), stream=sys.stderr,
                        format="[engine %(process)d] %(levelname)s %(message)s")
    if opts.render_workers < 1:
        raise SystemExit("--render-workers must be at least 1")
    server = Server(opts, _read_key(opts))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: server.stop(f"signal {signum}"))
    return server.serve()
