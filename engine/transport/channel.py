"""The authenticated control channel between client and engine: private folder, connection file, socket.

JSON messages only (``engine.protocol``), framed by ``multiprocessing.connection``'s ``send_bytes``;
never pickle. Authentication is multiprocessing's mutual HMAC challenge with a per-engine key.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import stat
import tempfile
import threading
from multiprocessing import connection as mpc
from typing import Any

from .. import protocol
from .slots import IS_WINDOWS

ENV_KEY = "FACEFUSION_ENGINE_KEY"  # hex authkey handed to an engine started by a client
CONNECTION_FILE = "engine.json"
AUTH_TIMEOUT_S = 5.0


def default_socket_dir() -> str:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    return os.path.join(base, f"facefusion-{uid}")


def ensure_private_dir(path: str) -> str:
    """Create (or check) a directory only this user can enter: mode 0700, owned by us."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if IS_WINDOWS:
        return path
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise PermissionError(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user; choose another --socket-dir")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def new_address(socket_dir: str) -> str:
    if IS_WINDOWS:
        return rf"\\.\pipe\facefusion-{os.getpid()}-{secrets.token_hex(4)}"
    return os.path.join(socket_dir, f"engine-{os.getpid()}.sock")


def address_family(address: str) -> str:
    return "AF_PIPE" if address.startswith("\\\\") else "AF_UNIX"


def write_connection_file(socket_dir: str, info: dict[str, Any]) -> str:
    """engine.json in the private directory (mode 0600): how another client finds and authenticates."""
    path = os.path.join(socket_dir, CONNECTION_FILE)
    from engine.io import atomic  # the engine's side only (the add-on reads this file, never writes it)

    atomic.write_text(path, json.dumps(info), 0o600)
    return path


def read_connection_file(socket_dir: str) -> dict[str, Any]:
    with open(os.path.join(socket_dir, CONNECTION_FILE)) as fh:
        return json.load(fh)


class Channel:
    """A control connection: JSON messages via send_bytes/recv_bytes only (never pickle)."""

    def __init__(self, conn: mpc.Connection) -> None:
        self.conn = conn
        self._send_lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(protocol.encode(message))

    def send_bytes(self, data: bytes) -> None:
        """One already encoded message (the engine's sender threads encode when they queue)."""
        with self._send_lock:
            self.conn.send_bytes(data)

    def recv_bytes(self) -> bytes:
        """One frame. Raises EOFError/OSError when the peer is gone or the frame is too big."""
        return self.conn.recv_bytes(protocol.MAX_MESSAGE_BYTES)

    def poll(self, timeout: float = 0.0) -> bool:
        return self.conn.poll(timeout)

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass


def listen(address: str) -> mpc.Listener:
    """The engine's listener. Authentication is done per connection (``authenticate_incoming``) so a
    peer that connects and then says nothing cannot stall the accept loop."""
    family = address_family(address)
    listener = mpc.Listener(address, family=family, backlog=16)
    if family == "AF_UNIX":
        os.chmod(address, 0o600)
    return listener


def close_listener(listener: mpc.Listener) -> None:
    """Close without multiprocessing's unlink of the address: it removes whatever file is there by then, and only
    a socket is ours to remove (the engine unlinks it itself, after checking)."""
    inner = getattr(listener, "_listener", None)
    finalizer = getattr(inner, "_unlink", None)
    if finalizer is not None:
        finalizer.cancel()
        inner._unlink = None
    listener.close()


def shutdown_connection(conn: mpc.Connection) -> None:
    """Wake any thread blocked reading ``conn`` (closing the fd alone does not)."""
    if IS_WINDOWS:
        return
    try:
        s = socket.socket(fileno=os.dup(conn.fileno()))
    except (OSError, ValueError):
        return
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()


def authenticate_incoming(conn: mpc.Connection, authkey: bytes, timeout: float = AUTH_TIMEOUT_S) -> None:
    """Mutual HMAC challenge (multiprocessing's), bounded in time. Raises AuthenticationError/OSError/EOFError."""
    timer = None
    if not IS_WINDOWS:
        timer = threading.Timer(timeout, shutdown_connection, (conn,))
        timer.daemon = True
        timer.start()
    try:
        mpc.deliver_challenge(conn, authkey)
        mpc.answer_challenge(conn, authkey)
    finally:
        if timer is not None:
            timer.cancel()


def connect(address: str, authkey: bytes) -> Channel:
    """Connect and authenticate (raises AuthenticationError on a wrong key, OSError if nobody listens)."""
    conn = mpc.Client(address, family=address_family(address), authkey=authkey)
    return Channel(conn)
