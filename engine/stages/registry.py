"""Every backend of every stage is made here, and checked against its stage's contract when it loads.

A backend is a factory ``factory(entry, runtime, **options) -> object``. A catalogue model names its backend
(``"backend": "inswapper"``), found as the module ``engine/stages/<stage>_<backend>.py`` whose ``BACKEND`` is
the factory; built-in models with no file (the geometric swapper, dlib's HOG detector, test doubles) are
registered under their own id with ``builtin=True``. ``register`` is the public way in, for plug-ins and tests.

A matte layer is a row of one table, read from the settings that declare one (``matte_layers()``: name, the
setting that picks its model, the stage of that model); the pipeline runs every enabled row the same way and
narrows ``FaceMatte`` by the per-pixel minimum.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine import settings as schema
from engine.errors import EngineError
from engine.models import catalogue
from engine.stages import contracts


@dataclass(frozen=True)
class Contract:
    methods: tuple[str, ...]
    attributes: tuple[str, ...]

    @staticmethod
    def of(protocol: type) -> Contract:
        """The public methods and annotated attributes a Protocol of ``engine.stages.contracts`` declares."""
        methods = tuple(n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_"))
        return Contract(methods, tuple(getattr(protocol, "__annotations__", {})))


CONTRACTS: dict[str, Contract] = {stage: Contract.of(proto) for stage, proto in contracts.STAGES.items()}
# stage -> the setting that picks its model (built-in models join that setting's choices when registered)
STAGE_SETTING = {"swap": "swapper", "enhance": "face_enhancer", "parse": "face_parser", "occlude": "occluder"}

Factory = Callable[..., Any]


@dataclass(frozen=True)
class Backend:
    stage: str
    factory: Factory | str  # a callable, or "module:Class" imported when first used
    # Job-level values the factory takes from what the pipeline offers (e.g. the source texture)
    wants: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuiltinModel:
    """A model with no file: nothing to fetch or verify. The ``__version__`` of the module ``version`` names
    stands in for a file hash in provenance."""

    id: str
    stage: str
    backend: str
    label: str
    version: str = "engine"


@dataclass(frozen=True)
class MatteLayer:
    name: str  # the EXR layer: <name>.A
    setting: str  # settings value "none" = off, else the model id to load
    stage: str
    on: str = "swapped"  # "target": judged on the plate's crop (what covers the face); "swapped": on the result


def matte_layers() -> list[MatteLayer]:
    """The table of matte layers: one row per setting that declares one (``Setting.extra["matte_layer"]``)."""
    return [MatteLayer(s.extra["matte_layer"], s.name, s.extra["stage"], s.extra.get("on", "swapped"))
            for s in schema.SCHEMA if "matte_layer" in s.extra]


class ContractError(EngineError):
    """A backend lacks part of its stage's contract: refused when it loads, before any frame is made."""


class UnknownBackend(LookupError):
    pass


PARSER_REGIONS = ("skin", "brows", "eyes", "nose", "mouth", "lips")

BACKENDS: dict[tuple[str, str], Backend] = {}  # (stage, backend name) -> how to make it
BUILTINS: dict[str, BuiltinModel] = {}
_cache: dict[tuple, Any] = {}
_lock = threading.Lock()


def register(stage: str, backend: str, factory: Factory | str, *, builtin: bool = False, label: str = "",
             wants: tuple[str, ...] = (), version: str = "engine") -> None:
    """Make ``backend`` loadable at ``stage``. With ``builtin`` it is also a model id (no catalogue file) and
    joins the choices of the stage's setting."""
    if stage not in CONTRACTS:
        raise UnknownBackend(f"unknown stage {stage!r}; stages: {', '.join(CONTRACTS)}")
    with _lock:
        BACKENDS[(stage, backend)] = Backend(stage, factory, tuple(wants))
        if builtin:
            BUILTINS[backend] = BuiltinModel(backend, stage, backend, label or backend, version)
        _cache.clear()  # a replaced backend must not be served from the cache
    if builtin and stage in STAGE_SETTING:
        schema.add_choice(STAGE_SETTING[stage], backend, label or backend)


def unregister(stage: str, backend: str) -> None:
    with _lock:
        BACKENDS.pop((stage, backend), None)
        builtin = BUILTINS.pop(backend, None)
        _cache.clear()
    if builtin is not None and stage in STAGE_SETTING:
        schema.remove_choice(STAGE_SETTING[stage], backend)


def model(model_id: str) -> catalogue.ModelEntry | BuiltinModel:
    if model_id in BUILTINS:
        return BUILTINS[model_id]
    return catalogue.get(model_id)


def models_for(stage: str) -> list[str]:
    """Model ids that ``create`` can build for ``stage``."""
    ids = [e.id for e in catalogue.by_stage(stage) if _spec(stage, e.backend) is not None]
    return ids + [b.id for b in BUILTINS.values() if b.stage == stage]


def is_neural(model_id: str) -> bool:
    """A catalogue model loaded through the runtime (what reports a provider)."""
    if model_id in BUILTINS:
        return False
    try:
        entry = catalogue.get(model_id)
    except catalogue.CatalogueError:
        return False
    return not entry.embedded and _spec(entry.stage, entry.backend) is not None


def _spec(stage: str, backend: str) -> Backend | None:
    """A registered backend, else the module named for it: ``engine/stages/<stage>_<backend>.py`` whose
    ``BACKEND`` is the factory (and ``WANTS`` the job values it takes). So a new backend is one module."""
    spec = BACKENDS.get((stage, backend))
    if spec is not None or stage not in CONTRACTS:
        return spec
    name = f"engine.stages.{stage}_{backend}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None
    factory = getattr(module, "BACKEND", None)
    if factory is None:
        raise ContractError(f"backend module {name} does not say which class it provides",
                            "end it with BACKEND = <the class>")
    spec = Backend(stage, factory, tuple(getattr(module, "WANTS", ())))
    with _lock:
        BACKENDS[(stage, backend)] = spec
    return spec


def wants(stage: str, model_id: str) -> tuple[str, ...]:
    """The job values the backend of ``model_id`` takes (e.g. ``source_texture``)."""
    spec = _spec(stage, model(model_id).backend)
    return spec.wants if spec is not None else ()


def check_contract(stage: str, name: str, backend: Any) -> None:
    """Refuse ``backend`` unless it has every method and attribute its stage's contract names."""
    contract = CONTRACTS[stage]
    missing = [f"method {m}()" for m in contract.methods if not callable(getattr(backend, m, None))]
    missing += [f"attribute {a}" for a in contract.attributes if not hasattr(backend, a)]
    if missing:
        raise ContractError(f"backend {name!r} is refused for stage {stage!r}: it lacks {', '.join(missing)}",
                            f"give it what the {stage} contract asks ({contracts.STAGES[stage].__name__} in "
                            f"engine/stages/contracts.py)")


def create(stage: str, model_id: str, runtime: Any, *, offered: dict[str, Any] | None = None, shared: bool = True,
           **options: Any) -> Any:
    """The checked backend for ``model_id`` at ``stage``, sharing ``runtime``'s sessions.

    Cached per (runtime, options) unless ``shared`` is False. ``offered``: job-level values (source texture,
    settings) of which the backend receives those it declared in ``wants``. Raises ``UnknownBackend`` for an
    id that is not a model of that stage, ``ContractError`` for a backend that does not fit, and
    ``EngineError`` (from ``engine.models.resolve``) when its file is missing or fails its hash.
    """
    entry = model(model_id)
    if entry.stage != stage:
        raise UnknownBackend(f"{model_id} is a {entry.stage} model, not a {stage} model")
    spec = _spec(stage, entry.backend)
    if spec is None:
        raise UnknownBackend(f"{model_id} (backend {entry.backend}) has no registered backend")
    kwargs = dict(options)
    kwargs.update({k: v for k, v in (offered or {}).items() if k in spec.wants})
    shared = shared and not spec.wants  # built on one job's values (its source texture): never cached
    key = (stage, model_id, id(runtime), tuple(sorted((k, _hashable(v)) for k, v in kwargs.items())))
    if shared:
        with _lock:
            if key in _cache:
                return _cache[key]
    factory = spec.factory
    if isinstance(factory, str):
        module, cls = factory.split(":")
        factory = getattr(importlib.import_module(module), cls)
    backend = factory(entry, runtime, **kwargs)
    check_contract(stage, entry.backend, backend)
    if not shared:
        return backend
    with _lock:
        _cache.setdefault(key, backend)
        return _cache[key]


def _hashable(v: Any) -> Any:
    try:
        hash(v)
        return v
    except TypeError:
        return id(v)


def clear() -> None:
    with _lock:
        _cache.clear()


def _occlusion(backend: Any, crops: np.ndarray) -> np.ndarray:
    return backend.occlusion(crops)


def _regions(backend: Any, crops: np.ndarray) -> np.ndarray:
    return backend.regions(crops, PARSER_REGIONS)


def _matte(backend: Any, crops: np.ndarray) -> np.ndarray:
    return backend.matte(crops)


def layer_call(layer: MatteLayer) -> Callable[[Any, np.ndarray], np.ndarray]:
    """How a layer's model gives its matte: the method of its stage's contract."""
    return {"occlude": _occlusion, "parse": _regions}.get(layer.stage, _matte)


# Backends that do not follow the module naming (one module serves three stages); the others are found by name.
for _stage, _name, _factory in (("landmarks", "dlib", "engine.stages.dlib_face:DlibLandmarker"),
                                ("recognize", "dlib", "engine.stages.dlib_face:DlibRecognizer")):
    register(_stage, _name, _factory)
# Built-in models with no file to fetch
register("detect", "dlib_hog", "engine.stages.dlib_face:DlibDetector", builtin=True,
         label="dlib HOG face detector (built into dlib)", version="dlib", wants=("upsample",))
register("swap", "geometric", "engine.stages.swap_geometric:GeometricSwapper", builtin=True,
         label=schema.BY_NAME["swapper"].choices[0][1], wants=("source_texture", "keep_eyes_mouth"))

