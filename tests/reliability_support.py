"""Helpers of the reliability tests (issue 11): a tiny real plate, a real engine subprocess whose exit code is
checked, raw authenticated channels and special files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from engine import PROTOCOL_VERSION, protocol, transport
from engine.client import EngineClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
SETTINGS = {"super_resolution": False}


def tiny_shot(folder: str, frames: int = 2) -> dict[str, str]:
    """A few 96 px PNG frames of a real photo and a 128 px source photo: a render takes seconds."""
    from engine import shots

    photo = shots.load_photo_linear("astronaut")[0:300, 100:400]
    plate, _ = shots.render_shot(photo, (96, 96), frames)
    pattern = shots.write_sequence(plate, os.path.join(folder, "plate"), ext="png")
    source = shots.write_photo("tom_hanks", os.path.join(folder, "src"), max_side=128)
    return {"pattern": pattern, "source": source}


def start_engine(roots: list[str], **kw: Any) -> EngineClient:
    return EngineClient.start(PY, root=ROOT, allowed_output_roots=roots, **kw)


def close_engine(client: EngineClient) -> None:
    """Stop an engine this test started and check it ended with exit code 0."""
    proc = client.process
    client.close()
    assert proc is not None and proc.returncode == 0, f"engine exit code {proc and proc.returncode}"


def serve_cmd(*args: str) -> list[str]:
    return [PY, "-m", "engine", "serve", *args]


def run_serve(*args: str, stdin: bytes = b"", timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(serve_cmd(*args), cwd=ROOT, input=stdin, capture_output=True, timeout=timeout)


def raw_channel(client: EngineClient) -> transport.Channel:
    info = transport.read_connection_file(client.socket_dir)
    return transport.connect(info["address"], bytes.fromhex(info["key"]))


def ask(ch: transport.Channel, msg: dict | bytes, timeout: float = 10.0) -> dict:
    """Send one message, return the next reply (events and notices in between are skipped)."""
    ch.conn.send_bytes(msg if isinstance(msg, bytes) else json.dumps(msg).encode())
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0 and ch.poll(left), f"no reply within {timeout} s"
        got = protocol.decode(ch.recv_bytes())
        if got.get("kind") == "reply":
            return got


def hello(ch: transport.Channel) -> dict:
    reply = ask(ch, protocol.request("hello", 1, protocol=PROTOCOL_VERSION, client="test"))
    assert reply["ok"], reply
    return reply


def wait_until(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.05)


def exrs(folder: str) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".exr") and not n.startswith(".")) \
        if os.path.isdir(folder) else []


def can_mount_private_tmpfs() -> str:
    """'' when this process may give a child its own small /dev/shm (root, mount namespaces); else why not."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "needs root on Linux to mount a small private tmpfs on /dev/shm"
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /dev/shm"], capture_output=True, timeout=30)
    return "" if probe.returncode == 0 else f"unshare/mount refused: {probe.stderr.decode(errors='replace')[:200]}"


class RawEngine:
    """``python -m engine serve`` started by hand (optionally with its own small /dev/shm), spoken to over raw
    channels; ``stop()`` returns its exit code."""

    def __init__(self, socket_dir: str, *args: str, shm_mib: int = 0) -> None:
        self.key = os.urandom(32)
        cmd = serve_cmd("--socket-dir", socket_dir, "--key-stdin", *args)
        if shm_mib:
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   f'mount -t tmpfs -o size={shm_mib}m tmpfs /dev/shm && exec "$@"', "sh", *cmd]
        env = {**os.environ, "PYTHONPATH": ROOT}
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(self.key.hex().encode() + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"engine exited during start-up with code {self.proc.wait(10)}"
        self.info = json.loads(line)
        self.address = self.info["address"]

    def channel(self, greet: bool = True) -> transport.Channel:
        ch = transport.connect(self.address, self.key)
        if greet:
            hello(ch)
        return ch

    def stop(self, timeout: float = 30.0) -> int:
        """Ask it to shut down (if still up) and return its exit code."""
        if self.proc.poll() is None:
            try:
                ask(self.channel(), protocol.request("shutdown", 2), timeout=10)
            except (OSError, EOFError, AssertionError):
                pass
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)


def write_huge_png(path: str, side: int) -> None:
    """A 1-bit grey PNG declaring ``side`` x ``side`` pixels, all black: tiny on disk, huge once decoded."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    z = zlib.compressobj(9)
    row = bytes(1 + (side + 7) // 8)  # filter byte 0, then the packed bits
    body = b"".join(z.compress(row * 1000) for _ in range(side // 1000)) + z.compress(row * (side % 1000))
    body += z.flush()
    with open(path, "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
                 + chunk(b"IDAT", body) + chunk(b"IEND", b""))
