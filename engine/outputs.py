"""Names of the files a bake writes, and the rule for temporary files of writers that died.

Standard library only: the add-on (which ships this module) and the client use the same names as the engine.
A frame is written to ``.<name>.<host>.<pid>.<random>.partial.exr`` in the same folder, then renamed (``<host>``
carries the PID namespace on Linux: ``name~<inode>``); only
the writer's own host can tell whether that pid still runs, so sweeps never touch another host's files (render
farm workers may share one cache folder).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import time

PREFIX = "facefusion"
PARTIAL_SUFFIX = ".partial.exr"
STALE_SECONDS = 6 * 3600  # a partial file this old is stale whatever its writer (a crashed host's leftovers)
# A frame write takes seconds. A file whose writer looks dead is only removed once it is this old, since a
# writer in another PID namespace on the same host (containers sharing the host name) also "looks dead".
QUIET_SECONDS = 600


def output_name(frame: int, prefix: str = PREFIX) -> str:
    return f"{prefix}.{frame:04d}.exr"


def _plain_host() -> str:
    return socket.gethostname().replace(".", "_") or "host"


def _host() -> str:
    """The host name, plus the PID namespace where the system names it (Linux): a writer whose name carries our
    own namespace is judged by its pid at once, without waiting QUIET_SECONDS for a container look-alike."""
    try:
        return f"{_plain_host()}~{os.stat('/proc/self/ns/pid').st_ino:x}"
    except OSError:
        return _plain_host()


def partial_prefix(path: str) -> str:
    """Prefix of the temporary file for ``path`` (tempfile adds a random part and the suffix)."""
    return f".{os.path.basename(path)}.{_host()}.{os.getpid()}."


def _writer(name: str) -> tuple[str, int] | None:
    """(host, pid) of a partial file's writer, from its name."""
    parts = name[: -len(PARTIAL_SUFFIX)].split(".")
    if len(parts) < 4 or not parts[-2].isdigit():
        return None
    return parts[-3], int(parts[-2])


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows
        import ctypes  # Windows only

        kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        try:
            return bool(kernel32.GetExitCodeProcess(handle, ctypes.byref(code))) and code.value == 259  # STILL_ACTIVE
        finally:
            kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def sweep_partials(folder: str, dead_pid: int | None = None) -> list[str]:
    """Remove temporary files left by writers of this host that no longer run (or only those of ``dead_pid``),
    and any older than STALE_SECONDS. Finished frames are only ever renamed into place, so never touched."""
    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    host, plain = _host(), _plain_host()
    now = time.time()
    for name in names:
        if not (name.startswith(".") and name.endswith(PARTIAL_SUFFIX)):
            continue
        path = os.path.join(folder, name)
        writer = _writer(name)
        try:
            age = now - os.stat(path).st_mtime
        except OSError:
            continue
        if writer is None or writer[0] not in (host, plain):
            dead = age > STALE_SECONDS
        elif dead_pid is not None:  # a client that saw its own engine die: exactly that writer's files
            dead = writer[1] == dead_pid
        elif writer[0] == host != plain:  # same host, same PID namespace: a dead pid is a dead writer
            dead = age > STALE_SECONDS or not pid_alive(writer[1])
        else:
            dead = age > STALE_SECONDS or (age > QUIET_SECONDS and not pid_alive(writer[1]))
        if dead:
            try:
                if stat.S_ISDIR(os.lstat(path).st_mode):  # an EXR writer's private folder (engine.io.atomic)
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                removed.append(name)
            except OSError:
                pass
    return removed
