"""How pixels and control messages travel between the engine and its clients. Standard library plus numpy.

``slots``: shared-memory segments (the engine creates them, clients attach). ``pool``: the slots one process
holds and who uses each (one type on both sides). ``channel``: the authenticated socket for JSON messages.
"""

from __future__ import annotations

from .. import protocol
from .channel import (
    AUTH_TIMEOUT_S,
    CONNECTION_FILE,
    ENV_KEY,
    Channel,
    address_family,
    authenticate_incoming,
    close_listener,
    connect,
    default_socket_dir,
    ensure_private_dir,
    listen,
    new_address,
    read_connection_file,
    shutdown_connection,
    write_connection_file,
)
from .pool import PoolEntry, SlotPool
from .slots import (
    HEADER_BYTES,
    IS_WINDOWS,
    LAYOUT_VERSION,
    MAGIC,
    PAGE,
    SEGMENT_PREFIX,
    SegmentNamer,
    SegmentNameTaken,
    Slot,
    SlotError,
    StaleSlot,
    align,
    list_segments,
    owner_pid,
    pid_alive,
    shm_free_bytes,
    sweep_dead_segments,
    unlink_segment,
)

__all__ = [
    "AUTH_TIMEOUT_S", "CONNECTION_FILE", "ENV_KEY", "HEADER_BYTES", "IS_WINDOWS", "LAYOUT_VERSION", "MAGIC", "PAGE",
    "SEGMENT_PREFIX", "Channel", "PoolEntry", "SegmentNameTaken", "SegmentNamer", "Slot", "SlotError", "SlotPool",
    "StaleSlot", "address_family", "align", "authenticate_incoming", "close_listener", "connect", "default_socket_dir",
    "ensure_private_dir",
    "list_segments", "listen", "new_address", "owner_pid", "pid_alive", "protocol", "read_connection_file",
    "shm_free_bytes", "shutdown_connection", "sweep_dead_segments", "unlink_segment", "write_connection_file",
]
