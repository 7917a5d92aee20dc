"""JSON read from files a user or another machine wrote: parsed with its nesting bounded, so a document nested
200,000 deep is a clear "too deeply nested" instead of a RecursionError in the middle of a job."""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # every document the engine writes nests under 10 deep


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that raises ValueError (never RecursionError) and refuses nesting deeper than ``max_depth``,
    and the non-standard NaN / Infinity constants (the engine never writes them)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    if depth(value, max_depth) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"holds {name}, which is not a JSON number")


def depth(value: Any, stop: int) -> int:
    """How deep ``value`` nests (lists and objects), counted without recursion; stops counting past ``stop``."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, d = todo.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, d)
            if d > stop:
                return d
            todo.extend((v, d + 1) for v in item if isinstance(v, (list, dict)))
    return deepest
