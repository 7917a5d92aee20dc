"""Print the string attributes of EXR files as JSON, read by the engine's OpenImageIO (Blender's Python has none).

    <engine python> tests/blender/read_attributes.py FILE...   ->   {"FILE": {"name": "value", ...}, ...}

Attributes that OpenImageIO renames (``capDate`` -> ``DateTime``), derives (``oiio:ColorSpace``) or turns into
strings from other types (``compression``, ``openexr:lineOrder``) are left out: the result is the header's own
``string`` attributes.
"""

from __future__ import annotations

import json
import sys

import OpenImageIO as oiio

DERIVED = {"DateTime", "oiio:ColorSpace", "compression", "openexr:lineOrder"}


def main() -> int:
    out = {}
    for path in sys.argv[1:]:
        inp = oiio.ImageInput.open(path)
        if inp is None:
            raise SystemExit(f"cannot open {path}: {oiio.geterror()}")
        spec = inp.spec()
        out[path] = {a.name: a.value for a in spec.extra_attribs if isinstance(a.value, str) and a.name not in DERIVED}
        inp.close()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
