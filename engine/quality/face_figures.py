"""Issue 33's per-face figures, gathered for the report: skin colour apart from lightness (skin_colour), printed
expression lines (lines), fine skin texture and its shimmer (texture), iris colour (iris); and their summary over
a shot."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.quality import iris, lines, skin_colour, texture

# The per-face figures of measure, in per_frame.csv's column order.
PER_FACE = ("dC", "dH", *lines.ZONES, "texture plate", "texture result", "texture change plate",
            "texture change result", "iris hue error", "iris chroma ratio", "iris level")


def measure(plate: np.ndarray, result: np.ndarray, matte: np.ndarray, lm68: np.ndarray, skin: np.ndarray,
            before: tuple[np.ndarray, np.ndarray] | None, source_iris: np.ndarray | None
            ) -> tuple[dict[str, float], np.ndarray]:
    """(figures of one face, the plate's cheek Lab colours for the noise floor). ``matte``: the result's face
    matte; ``skin``: the face's skin where the matte is at least 0.5; ``before``: the previous frame's (plate,
    result), when it was measured; ``source_iris``: iris.iris_lab of the source photo."""
    plate_labs = skin_colour.cheek_labs(plate, lm68)
    out = skin_colour.colour_errors(plate_labs, skin_colour.cheek_labs(result, lm68))
    out.update(lines.line_ratios(plate, result, lm68, matte >= 0.5))
    out.update(texture.texture_figures(plate, result, skin, before))
    if source_iris is not None:
        out.update(iris.iris_figures(result, plate, lm68, source_iris))
    return out, plate_labs


def _median(values: Sequence[float]) -> float:
    v = np.array(values, np.float64)
    return float(np.nanmedian(v)) if np.isfinite(v).any() else float("nan")


def summarise(faces: Sequence[tuple[int, np.ndarray, np.ndarray, dict[str, float]]]) -> dict[str, float]:
    """The shot's figures from (frame, box, plate cheek Lab, figures of measure) per measured face: colour errors
    with their floors (skin_colour.summarise), the median line ratio per zone, the texture ratios, and the iris
    figures' medians."""
    figures = [f for _, _, _, f in faces]
    floor = skin_colour.noise_floor([(frame, box, labs) for frame, box, labs, _ in faces])
    out = skin_colour.summarise(figures, floor)
    for zone in lines.ZONES:
        out[f"{zone} lines"] = _median([f.get(zone, np.nan) for f in figures])
    out.update(texture.ratios([f for f in figures if "texture plate" in f]))
    for key in ("iris hue error", "iris chroma ratio", "iris level"):
        out[key] = _median([f.get(key, np.nan) for f in figures])
    return out
