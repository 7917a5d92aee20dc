"""The files ``export`` and ``provenance`` are given, read with their problems named: a PNG renamed ``.exr``, a
truncated EXR, an EXR whose settings attribute is not a JSON object, a damaged C2PA box. Each is refused with one
line naming the file and what is wrong (EngineError, exit 2), never a traceback."""

from __future__ import annotations

from typing import Any

from engine.errors import EngineError
from engine.io import bounded_json
from engine.io.files import check_regular

SETTINGS_ATTR = "facefusion:settings"


def exr_attributes(path: str, *, need_rgba: bool = False) -> dict[str, str]:
    """The string attributes of the OpenEXR file ``path`` (header only; pixels are not read)."""
    import OpenImageIO as oiio

    check_regular(path, "the EXR")
    inp = oiio.ImageInput.open(path)
    if inp is None:
        try:
            error = oiio.geterror()
        except UnicodeDecodeError:  # the message quotes the damaged header's bytes
            error = "a damaged header"
        lines = [x.strip() for x in error.splitlines() if x.strip()]  # OIIO repeats itself per line
        raise EngineError(f"'{path}' cannot be read as an OpenEXR ({lines[-1] if lines else 'damaged'})",
                          "give an EXR the engine wrote (a truncated or damaged file cannot be read)")
    try:
        return _header(inp, path, need_rgba)
    except UnicodeDecodeError as exc:  # a damaged header: a channel name or attribute that is not text
        raise EngineError(f"'{path}' has a header field that is not valid text ({exc.reason} at byte {exc.start})",
                          "the EXR is damaged; render that frame again") from None
    finally:
        inp.close()


def _header(inp: Any, path: str, need_rgba: bool) -> dict[str, str]:
    if inp.format_name() != "openexr":
        raise EngineError(f"'{path}' is a {inp.format_name()} file, not an OpenEXR, whatever its name says",
                          "give the EXRs the engine wrote")
    spec = inp.spec()
    if need_rgba and not {"R", "G", "B", "A"} <= set(spec.channelnames):
        raise EngineError(f"'{path}' has no R, G, B and A channels ({', '.join(spec.channelnames)[:80]})",
                          "give the EXRs the engine wrote")
    return {a.name: a.value for a in spec.extra_attribs if isinstance(a.value, str)}


def settings_of(attrs: dict[str, str], path: str) -> dict[str, Any]:
    """The render settings an EXR records ({} when it records none)."""
    raw = attrs.get(SETTINGS_ATTR)
    if raw is None:
        return {}
    try:
        value = bounded_json.loads(raw)
    except ValueError as exc:
        raise EngineError(f"'{path}': its {SETTINGS_ATTR} attribute is not JSON ({exc})",
                          "give an EXR the engine wrote (the attribute was edited or damaged)") from None
    if not isinstance(value, dict):
        raise EngineError(f"'{path}': its {SETTINGS_ATTR} attribute is a JSON {type(value).__name__}, not an object",
                          "give an EXR the engine wrote (the attribute was edited or damaged)")
    return value


def manifest_of(path: str) -> dict[str, Any] | None:
    """The file's C2PA manifest (None: it has none); a box c2pa cannot parse is named, not raised."""
    from engine.export.sign import read_manifest

    check_regular(path, "the file")
    try:
        return read_manifest(path)
    except Exception as exc:  # noqa: BLE001 (c2pa raises its own C2paError family for every damaged box)
        raise EngineError(f"'{path}': its C2PA data cannot be parsed ({str(exc).strip()[:200]})",
                          "the file is truncated or damaged; export it again from the EXRs") from None
