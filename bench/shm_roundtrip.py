"""Round trip of one UHD RGBA float32 frame client -> engine -> client, through the real engine server.

Compares (medians over --repeat runs, after a warm-up that creates and pre-faults the slots):
  memcpy       one in-process ``np.copyto`` of the frame (the floor)
  shm (view)   ``EngineClient.echo(frame, copy=False)``: client copies into a slot, the engine copies the
               slot into its result slot, the client gets a zero-copy view of the result
  shm (copy)   ``EngineClient.echo(frame)``: the same plus the client copying the result out
  control      the same bytes sent there and back over a ``multiprocessing.connection`` (AF_UNIX,
               authkey) to a peer process: what the pixels would cost without shared memory
  ping         one tiny control message there and back

Targets (issue 3): shm round trip <= 2.5x memcpy, >= 5x faster than the control connection.
Run:  .venv/bin/python bench/shm_roundtrip.py [--repeat 10] [--width 3840 --height 2160]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import connection as mpc

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from engine.client import EngineClient  # noqa: E402

ECHO_PEER = """
import sys
from multiprocessing import connection as mpc
conn = mpc.Client(sys.argv[1], family="AF_UNIX", authkey=bytes.fromhex(sys.argv[2]))
while True:
    try:
        data = conn.recv_bytes()
    except EOFError:
        break
    conn.send_bytes(data)
"""


def timed(fn, repeat: int, warmup: int = 2) -> tuple[float, float]:
    """(median, best) seconds."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), min(samples)


def control_connection_round_trip(frame: np.ndarray, repeat: int) -> tuple[float, float]:
    """The frame's bytes over multiprocessing.connection to a peer process and back."""
    key = os.urandom(16)
    with tempfile.TemporaryDirectory(prefix="ffb-") as d:
        address = os.path.join(d, "c.sock")
        listener = mpc.Listener(address, family="AF_UNIX", authkey=key)
        # the key goes to the peer on argv here only because this is a throwaway benchmark peer
        peer = subprocess.Popen([sys.executable, "-c", ECHO_PEER, address, key.hex()])
        conn = listener.accept()
        out = np.empty_like(frame)
        payload = memoryview(frame).cast("B")

        def once() -> None:
            conn.send_bytes(payload)
            n = conn.recv_bytes_into(memoryview(out).cast("B"))
            assert n == frame.nbytes

        try:
            seconds = timed(once, repeat, warmup=1)
            assert np.array_equal(out, frame)
        finally:
            conn.close()
            listener.close()
            peer.wait(10)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=3840)
    ap.add_argument("--height", type=int, default=2160)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--python", default=sys.executable, help="the engine's Python")
    args = ap.parse_args()

    frame = np.random.default_rng(0).random((args.height, args.width, 4), dtype=np.float32)
    dst = np.empty_like(frame)
    mb = frame.nbytes / 1e6

    memcpy = timed(lambda: np.copyto(dst, frame), args.repeat)

    client = EngineClient.start(args.python, root=ROOT)
    try:
        result = {}

        def echo_view() -> None:
            result["v"] = client.echo(frame, copy=False)

        shm_view = timed(echo_view, args.repeat)
        assert np.array_equal(result.pop("v"), frame)
        shm_copy = timed(lambda: client.echo(frame), args.repeat)
        ping = timed(client.ping, 200, warmup=10)
    finally:
        client.close()
    control = control_connection_round_trip(frame, max(3, args.repeat // 2))

    rows = [
        ("memcpy (np.copyto, in-process)", memcpy),
        ("shm round trip, result as view", shm_view),
        ("shm round trip, result copied out", shm_copy),
        ("control connection round trip", control),
    ]
    print(f"frame {args.width}x{args.height} RGBA float32 = {mb:.1f} MB; {args.repeat} runs; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'path':36s} {'median ms':>10s} {'best ms':>8s} {'GB/s':>6s} {'x memcpy (median/best)':>24s}")
    for name, (med, best) in rows:
        print(f"{name:36s} {med * 1e3:10.1f} {best * 1e3:8.1f} {mb / 1e3 / med:6.2f} "
              f"{med / memcpy[0]:11.2f} / {best / memcpy[1]:.2f}")
    print(f"control message round trip (ping): median {ping[0] * 1e6:.0f} us")
    for label, (med, best) in (("view", shm_view), ("copy", shm_copy)):
        print(f"shm ({label}): {med / memcpy[0]:.2f}x memcpy (best {best / memcpy[1]:.2f}x; target <= 2.5x); "
              f"control connection is {control[0] / med:.1f}x slower (target >= 5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
