"""The one typed schema of a swap job's settings.

Standard library only: the Blender add-on imports this module to derive its properties, the CLI derives
its options from it, and the engine validates the JSON it receives with it. Nothing else lists settings.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, make_dataclass, replace
from typing import Any


class SettingsError(ValueError):
    """A settings value is missing, of the wrong type or out of range."""


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # "enum" | "float" | "int" | "bool" | "str"
    default: Any
    label: str
    description: str
    group: str
    choices: tuple[tuple[str, str], ...] = ()  # (value, description)
    min: float | None = None
    max: float | None = None
    # {"matte_layer": layer name, "stage": stage of its model[, "on": "target"]}: this setting picks the model of
    # a matte layer (off at "none"); engine.stages.registry.matte_layers() reads these rows.
    extra: dict[str, Any] = field(default_factory=dict)
    # (other setting, "in" | "not in", values): when this setting has an effect at all. Where it has none, its
    # value is reset to the default before hashing, so changing it never re-keys a cache (normalise()).
    applies: tuple[str, str, tuple[Any, ...]] | None = None

    def has_effect(self, values: dict[str, Any]) -> bool:
        if self.applies is None:
            return True
        other, op, allowed = self.applies
        inside = values.get(other, BY_NAME[other].default) in allowed
        return inside if op == "in" else not inside

    def validate(self, value: Any) -> Any:
        kind = self.kind
        if kind == "bool":
            if not isinstance(value, bool):
                raise SettingsError(f"setting '{self.name}' must be true or false, got {value!r}")
            return value
        if kind == "enum":
            allowed = [c[0] for c in self.choices]
            if value not in allowed:
                raise SettingsError(
                    f"setting '{self.name}' must be one of {', '.join(allowed)}; got {value!r}"
                )
            return value
        if kind == "str":
            if not isinstance(value, str):
                raise SettingsError(f"setting '{self.name}' must be a string, got {value!r}")
            return value
        if kind in ("int", "float"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SettingsError(f"setting '{self.name}' must be a number, got {value!r}")
            if isinstance(value, float) and not math.isfinite(value):  # 1e400 in JSON, Infinity, NaN
                raise SettingsError(f"setting '{self.name}' must be a finite number, got {value!r}")
            if kind == "int":
                if int(value) != value:
                    raise SettingsError(f"setting '{self.name}' must be a whole number, got {value!r}")
                value = int(value)
            else:
                value = float(value)
                if value != value:  # NaN
                    raise SettingsError(f"setting '{self.name}' must be a number, got NaN")
            if self.min is not None and value < self.min:
                raise SettingsError(f"setting '{self.name}' must be at least {self.min}, got {value}")
            if self.max is not None and value > self.max:
                raise SettingsError(f"setting '{self.name}' must be at most {self.max}, got {value}")
            return value
        raise AssertionError(f"unknown setting kind {kind}")


SELECTOR_CHOICES = (
    ("all", "Replace every face found"),
    ("largest", "Replace only the largest face of each frame"),
    ("reference", "Replace faces that look like the face picked in the reference frame"),
    ("index", "Replace the face at a position, counted left to right"),
)
COLOUR_CHOICES = (
    ("gain_reinhard", "Per-channel gain in log space, then a Reinhard mean/std match in Lab"),
    ("gain", "Per-channel gain in log space only (exposure and white balance)"),
    ("reinhard", "Reinhard mean/std match in Lab only"),
    ("none", "No colour match"),
)
BLEND_CHOICES = (
    ("poisson", "Gradient-domain blend in a band inside the edge: the face meets the plate's light seamlessly"),
    ("multiband", "Laplacian-pyramid blend: wide for low frequencies, narrow for fine ones"),
    ("none", "The matte's feather only"),
)
OUTPUT_CHOICES = (
    ("face", "Premultiplied face layer with mattes; Alpha Over on the plate gives the composite"),
    ("composite", "The full composited frame with mattes"),
)
# Catalogue ids; the neural ones (SCRFD, RetinaFace, YuNet) are downloaded on the artist's request.
DETECTOR_CHOICES = (
    ("blazeface", "MediaPipe BlazeFace full range, tiled on large frames (embedded, fast)"),
    ("blazeface_short_range", "MediaPipe BlazeFace short range: close-up faces only (embedded)"),
    ("dlib_hog", "dlib HOG detector: frontal faces, slow on large frames (built in)"),
    ("scrfd_2.5g", "SCRFD 2.5G; needs download [non-commercial]"),
    ("retinaface_10g", "RetinaFace 10G; needs download [non-commercial]"),
    ("yunet_2023_mar", "OpenCV YuNet; needs download"),
)
LANDMARKER_CHOICES = (
    ("mesh_468", "MediaPipe 468-point face mesh, following each face between key frames (embedded)"),
    ("dlib_68", "dlib 68-point shape predictor on every frame (embedded)"),
    ("2dfan4", "2DFAN4 68 points; needs download"),
    ("2d106", "InsightFace 2d106; needs download [non-commercial]"),
)
# Extended by the model catalogue (issue 5) with neural swappers; the geometric one needs no download.
SWAPPER_CHOICES: tuple[tuple[str, str], ...] = (
    ("geometric", "Built-in landmark mesh warp of the source face (CPU, no download)"),
)


def _neural_swappers() -> tuple[tuple[str, str], ...]:
    """Neural swappers from the model catalogue (models/catalogue.json, read with the standard library)."""
    try:  # the add-on may load this file alone (no package around it): then only the built-in swapper
        from .models.catalogue import swapper_choices
    except ImportError:
        return ()
    return swapper_choices()


SWAPPER_CHOICES = SWAPPER_CHOICES + _neural_swappers()


def _catalogue_choices(stage: str, off: str) -> tuple[tuple[str, str], ...]:
    """("none", off) plus the catalogue's models of a stage (downloaded on the artist's request only)."""
    try:  # as above: the catalogue is optional when this file is loaded alone
        from .models.catalogue import by_stage
        entries = by_stage(stage)
    except (ImportError, OSError, ValueError):
        entries = []
    return (("none", off),) + tuple(
        (e.id, f"{e.label}; needs download" + (f" [{e.licence.name}]" if e.non_commercial else ""))
        for e in entries if e.backend not in ("dlib", "waifu2x"))

SCHEMA: tuple[Setting, ...] = (
    Setting("face_selector", "enum", "all", "Faces", "Which faces in the plate are replaced", "faces",
            choices=SELECTOR_CHOICES),
    Setting("reference_frame", "int", 1, "Reference Frame",
            "Plate frame that holds the reference face (selector 'reference')", "faces", min=0,
            applies=("face_selector", "in", ("reference",))),
    Setting("reference_face", "int", 0, "Reference Face",
            "Index of the reference face in that frame, left to right (selector 'reference')", "faces", min=0,
            applies=("face_selector", "in", ("reference",))),
    Setting("reference_distance", "float", 0.6, "Max Distance",
            "Identity distance under which a face counts as the reference person (dlib: 0.6)", "faces",
            min=0.0, max=2.0, applies=("face_selector", "in", ("reference",))),
    Setting("face_index", "int", 0, "Face Index",
            "Position of the face to replace, counted left to right from 0 (selector 'index')", "faces", min=0,
            applies=("face_selector", "in", ("index",))),
    Setting("detector", "enum", "blazeface", "Face Detector",
            "Finds faces on key frames and where a followed face was lost", "faces", choices=DETECTOR_CHOICES),
    Setting("landmarker", "enum", "mesh_468", "Landmarks",
            "Places the face's points on every frame (every choice gives the 68-point set the mattes use)",
            "faces", choices=LANDMARKER_CHOICES),
    Setting("detector_score", "float", 0.5, "Detector Score",
            "Detections scoring under this are ignored (neural detectors)", "faces", min=0.05, max=1.0,
            applies=("detector", "not in", ("dlib_hog",))),
    Setting("mesh_score", "float", 0.5, "Mesh Face Score",
            "Face score under which the 468-point mesh counts a face as lost (lower keeps near-profile faces)",
            "faces", min=0.0, max=1.0, applies=("landmarker", "in", ("mesh_468",))),
    Setting("key_interval", "int", 6, "Key-Frame Interval",
            "Run the detector every this many frames (and at every cut); the mesh follows faces in between",
            "faces", min=1, max=120, applies=("landmarker", "in", ("mesh_468",))),
    Setting("detector_upsample", "int", 1, "Detector Upsample",
            "Upsample the frame this many times before detection; finds smaller faces, costs time", "faces",
            min=0, max=3, applies=("detector", "in", ("dlib_hog",))),
    Setting("swapper", "enum", "geometric", "Swapper", "Face swapper model", "swap", choices=SWAPPER_CHOICES),
    Setting("keep_eyes_mouth", "bool", True, "Keep Eyes and Mouth",
            "Keep the target's own eyes and mouth interior so expression and speech survive", "swap"),
    Setting("colour_match", "enum", "none", "Colour Match",
            "A global colour match of the swapped face to the plate's skin, before the lighting step (which "
            "already takes the plate's colour; use it with Lighting Strength 0 for the older look)", "colour",
            choices=COLOUR_CHOICES),
    Setting("colour_strength", "float", 1.0, "Colour Strength", "How much of the colour match is applied",
            "colour", min=0.0, max=1.0, applies=("colour_match", "not in", ("none",))),
    Setting("lighting_strength", "float", 1.0, "Lighting Strength",
            "How much of the plate's light (shading and colour cast of its skin) the face takes; 0 keeps the "
            "swap's own", "colour", min=0.0, max=1.0),
    Setting("lighting_scale", "float", 0.04, "Lighting Scale",
            "Size of the light's smallest feature taken from the plate, as a fraction of the face size", "colour",
            min=0.02, max=0.2, applies=("lighting_strength", "not in", (0.0,))),
    Setting("blend_mode", "enum", "poisson", "Edge Blend",
            "How the face meets the plate at the matte's edge (in float linear light)", "colour",
            choices=BLEND_CHOICES),
    Setting("blend_band", "float", 0.15, "Blend Band",
            "Width of the seamless band inside the matte's edge, as a fraction of the face size", "colour",
            min=0.05, max=1.0, applies=("blend_mode", "in", ("poisson",))),
    Setting("detail_match", "bool", True, "Match Detail",
            "Soften the face to the plate face's sharpness (never sharper than its surroundings)", "colour"),
    Setting("grain_match", "bool", True, "Match Grain", "Give the face the plate face's grain", "colour",
            applies=("detail_match", "in", (True,))),
    Setting("plate_texture", "bool", True, "Plate Skin Texture",
            "Give the skin the plate face's own fine texture and grain where the face is pasted (the source "
            "photo's pores and grain left out); eyes, brows, lips and nostrils keep the swap's", "colour"),
    Setting("expression_lines", "enum", "creases", "Expression Lines",
            "Whose smile folds, crow's feet and forehead lines the face shows. 'creases': the plate's creases, the "
            "source's taken out (and half a bearded source's shadow with them), the source's broader cheek and "
            "brow modelling kept; 'swap': the source photo's "
            "lines as they are; 'plate': all the plate's detail coarser than the skin texture there (skin colour "
            "and expression follow the plate; the face reads less like the source on bearded or smiling source "
            "photos); 'none': the source's taken out, the plate's not put in", "colour",
            choices=(("creases", "The plate's creases, the source's modelling"), ("swap", "The source photo's lines"),
                     ("plate", "The plate's own lines and modelling"), ("none", "No lines of either"))),
    Setting("super_resolution", "bool", True, "Super-Resolution",
            "Upscale the source face (waifu2x) when the plate's face is larger than the source's detail",
            "enhance"),
    Setting("sr_denoise", "int", 1, "Denoise", "waifu2x denoise level (0 = none, 3 = strongest)", "enhance",
            min=0, max=3, applies=("super_resolution", "in", (True,))),
    Setting("face_enhancer", "enum", "none", "Face Enhancer",
            "Restore detail of the swapped face with a neural face restorer", "enhance",
            choices=_catalogue_choices("enhance", "No face restorer")),
    Setting("enhancer_blend", "float", 0.8, "Enhancer Blend", "How much of the restored face is used", "enhance",
            min=0.0, max=1.0, applies=("face_enhancer", "not in", ("none",))),
    Setting("face_parser", "enum", "none", "Region Matte",
            "Limit the matte to skin, brows, eyes, nose, mouth and lips found by a face parser", "matte",
            choices=_catalogue_choices("parse", "No region matte"),
            extra={"matte_layer": "Regions", "stage": "parse"}),
    Setting("occluder", "enum", "none", "Occlusion Matte",
            "Keep hands, hair and objects in front of the face out of the matte", "matte",
            choices=_catalogue_choices("occlude", "No occlusion matte"),
            extra={"matte_layer": "Occlusion", "stage": "occlude", "on": "target"}),
    Setting("matte_erode", "float", 0.015, "Matte Erode",
            "Shrink the matte by this fraction of the face size before feathering", "matte", min=0.0, max=0.3),
    Setting("matte_feather", "float", 0.06, "Matte Feather",
            "Soften the matte edge over this fraction of the face size", "matte", min=0.0, max=0.3),
    Setting("temporal_smoothing", "int", 2, "Smoothing",
            "Frames on each side used to smooth face geometry over time (0 = off)", "faces", min=0, max=8),
    Setting("output_mode", "enum", "face", "Output", "What the EXR's RGBA holds", "output", choices=OUTPUT_CHOICES),
    Setting("colorspace", "str", "auto", "Plate Colour Space",
            "Colour space of the plate: auto (EXR linear, others sRGB), or a colour space name", "output"),
    # issue 14: an invisible mark in the replaced region; turning it off is recorded (a studio policy can lock it)
    Setting("watermark", "bool", True, "Invisible Watermark",
            "Mark the replaced face invisibly (engine, source identity and render id; 'python -m engine watermark "
            "detect' reads it back from exported images and movies)", "output"),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SCHEMA}


def defaults() -> dict[str, Any]:
    return {s.name: s.default for s in SCHEMA}


class _SettingsBase:
    """Attribute access to every setting (``s.colour_strength``), frozen, generated from ``SCHEMA``."""

    __slots__ = ()

    def __getitem__(self, name: str) -> Any:  # callers that still index by name (server, add-on tests)
        if name not in BY_NAME:
            raise KeyError(name)
        return getattr(self, name)

    def as_dict(self) -> dict[str, Any]:
        return {s.name: getattr(self, s.name) for s in SCHEMA}


_PY_TYPES = {"enum": str, "str": str, "bool": bool, "int": int, "float": float}
_generated: tuple[tuple[str, ...], type] | None = None


def settings_class() -> type:
    """The frozen settings type of the current schema (regenerated when a setting is registered)."""
    global _generated
    names = tuple(s.name for s in SCHEMA)
    if _generated is None or _generated[0] != names:
        cls = make_dataclass("Settings", [(s.name, _PY_TYPES[s.kind]) for s in SCHEMA], bases=(_SettingsBase,),
                             frozen=True)
        _generated = (names, cls)
    return _generated[1]


def validate(values: Any, *, partial_ok: bool = True) -> Any:
    """A complete, checked, frozen settings object. Unknown names are refused, missing ones take defaults."""
    if isinstance(values, _SettingsBase):
        values = values.as_dict()
    if not isinstance(values, dict):
        raise SettingsError("settings must be a JSON object")
    unknown = sorted(set(values) - set(BY_NAME))
    if unknown:
        raise SettingsError(f"unknown setting(s): {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    if not partial_ok:
        missing = sorted(set(BY_NAME) - set(values))
        if missing:
            raise SettingsError(f"missing setting(s): {', '.join(missing)}")
    out = defaults()
    for name, value in values.items():
        out[name] = BY_NAME[name].validate(value)
    return settings_class()(**out)


def normalise(values: Any) -> dict[str, Any]:
    """Complete, checked settings with every setting that has no effect reset to its default: equal pixels give
    equal settings (cache keys, provenance), whatever was left in the unused fields."""
    out = validate(values).as_dict()
    return {name: (value if BY_NAME[name].has_effect(out) else BY_NAME[name].default) for name, value in out.items()}


def canonical_json(values: Any) -> str:
    if isinstance(values, _SettingsBase):
        values = values.as_dict()
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def register(setting: Setting) -> None:
    """Add a setting (a plug-in's matte layer switch, say). Its name must be new."""
    global SCHEMA
    if setting.name in BY_NAME:
        raise SettingsError(f"setting '{setting.name}' exists already")
    SCHEMA = SCHEMA + (setting,)
    BY_NAME[setting.name] = setting


def add_choice(name: str, value: str, description: str) -> None:
    """Offer one more value of an enum setting (a registered built-in backend, e.g. a swapper)."""
    global SCHEMA
    old = BY_NAME[name]
    if any(c[0] == value for c in old.choices):
        return
    new = replace(old, choices=old.choices + ((value, description),))
    SCHEMA = tuple(new if s.name == name else s for s in SCHEMA)
    BY_NAME[name] = new


def unregister(name: str) -> None:
    """Remove a setting added by ``register`` (a plug-in unloading)."""
    global SCHEMA
    SCHEMA = tuple(s for s in SCHEMA if s.name != name)
    BY_NAME.pop(name, None)


def remove_choice(name: str, value: str) -> None:
    global SCHEMA
    old = BY_NAME[name]
    new = replace(old, choices=tuple(c for c in old.choices if c[0] != value))
    SCHEMA = tuple(new if s.name == name else s for s in SCHEMA)
    BY_NAME[name] = new
