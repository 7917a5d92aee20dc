"""The watermark's payload: 32 bits (engine id, part of the source-identity hash, render id) plus a CRC-8.

The render id comes from what keys a render's output (settings, source identity, plate, engine version), so a
re-render and every farm chunk of the same shot carry the same payload, frame for frame.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

ENGINE_ID = 0xFA  # "Face Fusion": the 8 bits every mark of this engine starts with
PAYLOAD_BITS = 32
CODE_BITS = PAYLOAD_BITS + 8  # payload + CRC-8


@dataclass(frozen=True)
class Payload:
    engine: int  # 8 bits
    identity: int  # 12 bits: the top of the source-identity hash
    render: int  # 12 bits: the top of the render id

    def as_int(self) -> int:
        return (self.engine << 24) | (self.identity << 12) | self.render

    def describe(self) -> dict[str, str]:
        return {"engine": f"{self.engine:02x}", "identity_prefix": f"{self.identity:03x}",
                "render_prefix": f"{self.render:03x}", "payload": f"{self.as_int():08x}"}


def render_id(settings_json: str, identity_digest: str, plate_name: str, engine_version: str) -> str:
    """16 hex digits naming a render: what its pixels depend on, without machine-specific paths."""
    doc = [settings_json, identity_digest, plate_name, engine_version]
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:16]


def payload_for(identity_digest: str, render: str) -> Payload:
    return Payload(ENGINE_ID, int(identity_digest[:3], 16), int(render[:3], 16))


def crc8(value: int, nbits: int = PAYLOAD_BITS) -> int:
    """CRC-8 (polynomial 0x07) of the payload bits, most significant first."""
    crc = 0
    for i in range(nbits - 1, -1, -1):
        bit = (value >> i) & 1
        top = ((crc >> 7) & 1) ^ bit
        crc = ((crc << 1) & 0xFF) ^ (0x07 if top else 0)
    return crc


def encode(p: Payload) -> list[int]:
    """The coded bits (payload then CRC), each 0 or 1."""
    v = (p.as_int() << 8) | crc8(p.as_int())
    return [(v >> i) & 1 for i in range(CODE_BITS - 1, -1, -1)]


def decode(bits: list[int]) -> Payload | None:
    """The payload when the CRC holds and the engine id is ours, else None."""
    v = 0
    for b in bits:
        v = (v << 1) | int(b)
    value, crc = v >> 8, v & 0xFF
    if crc8(value) != crc or (value >> 24) != ENGINE_ID:
        return None
    return Payload(value >> 24, (value >> 12) & 0xFFF, value & 0xFFF)


def matches(p: Payload, attrs: dict[str, Any]) -> bool:
    """Whether a decoded payload agrees with a frame's provenance attributes (when those survive)."""
    ident = str(attrs.get("facefusion:source_identity", ""))
    rid = str(attrs.get("facefusion:render_id", ""))
    return bool(ident and rid) and payload_for(ident, rid) == p
