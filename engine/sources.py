"""The source identity: photos of one person, analysed once and cached, and their face texture at any scale."""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from engine import track_models
from engine.errors import EngineError
from engine.io import colour
from engine.io.plates import Plate
from engine.job import ImageInput
from engine.stages import geometry68, mesh_warp, source_glasses
from engine.stages.align import FFHQ_TEMPLATE, crop_matrix, transform_points, warp_crop
from engine.stages.contracts import Face, SourceFace, SourceIdentity
from engine.stages.swap_geometric import SourceView


def load_photo_srgb(src: ImageInput) -> np.ndarray:
    """A photo as float32 sRGB (H, W, 3) in [0, 1], whatever it was stored as."""
    plate = Plate(src, what="source photo")
    try:
        rgba, gamut = plate.read(plate.frames[0])
    finally:
        plate.close()
    return colour.linear_to_model(rgba[..., :3], gamut)


# Photo detectors, tried in order until one gives a face the job's landmarker accepts. Measured on the photos
# in ../shared/data/photos, insightface's t1 and scikit-image's astronaut: BlazeFace short-range finds every
# single large face (scores 0.92-0.97, 2-4 ms) but none in group photos; full-range finds the group photos'
# faces but scores large close-ups at 0.62-0.65, next to its 0.6 threshold; dlib's HOG (looking harder each
# time) is the fallback. A job that chose dlib_hog keeps it first: its landmarker was fitted to HOG boxes.
BLAZEFACE_PHOTO = (("blazeface_short_range", 0), ("blazeface", 0))
DLIB_PHOTO = (("dlib_hog", 0), ("dlib_hog", 1), ("dlib_hog", 2))


def photo_detectors(job_detector: str) -> tuple[tuple[str, int], ...]:
    """(detector id, upsample) pairs tried on a source photo, in order."""
    return DLIB_PHOTO + BLAZEFACE_PHOTO if job_detector == "dlib_hog" else BLAZEFACE_PHOTO + DLIB_PHOTO


def landmarks_keeping_mesh(landmarker: Any, frame_u8: np.ndarray, faces: list[Face]) -> None:
    """The landmarker's points on each face; the 468-point mesh also leaves its dense points (``mesh468``) on
    the faces it accepts (a face it rejects has no 68 points)."""
    if not hasattr(landmarker, "analyse"):  # not the mesh
        landmarker.landmarks(frame_u8, faces)
        return
    for f, res in zip(faces, landmarker.analyse(frame_u8, faces), strict=True):
        if f.landmarks68 is not None and res.score >= landmarker.score_threshold:
            f.mesh468 = res.points


NO_FACE_HINT = "use a photo where the face is frontal, unobstructed and at least 80 pixels wide"


def find_photo_faces(u8: np.ndarray, analyse: Callable[[np.ndarray, str, int], list[Face]],
                     detectors: tuple[tuple[str, int], ...]) -> tuple[list[Face], str]:
    """The faces (with 68 points) of the first detector that finds any, and that detector's id ('' when none)."""
    for detector, upsample in detectors:
        found = [f for f in analyse(u8, detector, upsample) if f.landmarks68 is not None]
        if found:
            return found, detector
    return [], ""


def used_face(found: list[Face]) -> int:
    """Which of a photo's faces becomes the source identity: the largest (the first of equals)."""
    return max(range(len(found)), key=lambda i: (found[i].size, -i))


def check_photos(srcs: list[ImageInput], analyse: Callable[[np.ndarray, str, int], list[Face]],
                 detectors: tuple[tuple[str, int], ...]) -> list[dict[str, Any]]:
    """What a bake would find in each photo, without failing on one that shows no face: per photo its name, size,
    the faces found (boxes, left to right), which one is used, the detector that found them, and what to do
    when there is none. The same detection as ``analyse_sources``."""
    out = []
    for src in srcs:
        u8 = colour.to_u8(load_photo_srgb(src))
        found, detector = find_photo_faces(u8, analyse, detectors)
        found = sorted(found, key=lambda f: f.centre[0])
        entry: dict[str, Any] = {"photo": src.describe(), "width": int(u8.shape[1]), "height": int(u8.shape[0]),
                                 "faces": len(found), "boxes": [[round(float(v), 1) for v in f.box] for f in found],
                                 "used": used_face(found) if found else None, "detector": detector}
        if not found:
            entry["hint"] = NO_FACE_HINT
        out.append(entry)
    return out


def analyse_sources(srcs: list[ImageInput], analyse: Callable[[np.ndarray, str, int], list[Face]],
                    warn: Callable[[str], None], detectors: tuple[tuple[str, int], ...] = BLAZEFACE_PHOTO + DLIB_PHOTO
                    ) -> SourceIdentity:
    """Detect the face in each photo (the largest, with a warning when there are several) and average the
    identities. ``analyse(frame_u8, detector_id, upsample)`` returns the faces that detector finds, with the
    job's landmarker's points (68 always, ``mesh468`` with the mesh) and embeddings."""
    if not srcs:
        raise EngineError("no source photo given", "pass at least one --source photo of the new face")
    faces: list[SourceFace] = []
    digest = hashlib.sha256()
    for src in srcs:
        srgb = load_photo_srgb(src)
        u8 = colour.to_u8(srgb)
        digest.update(u8.tobytes())
        found, _ = find_photo_faces(u8, analyse, detectors)
        if not found:
            raise EngineError(f"no face found in source photo '{src.describe()}'", NO_FACE_HINT)
        if len(found) > 1:
            warn(f"source photo '{src.describe()}' shows {len(found)} faces; using the largest")
        faces.append(SourceFace(image_srgb=srgb, face=found[used_face(found)]))
    keys = set.intersection(*(set(f.face.embeddings) for f in faces)) if faces else set()
    embeddings = {}
    for k in keys:
        vecs = np.stack([f.face.embeddings[k] for f in faces])
        embeddings[k] = vecs.mean(0)
    return SourceIdentity(faces=faces, embeddings=embeddings, digest=digest.hexdigest())


class SourceTexture:
    """The source face cut at the crop size and template a swapper asks for, super-resolved when the target
    face is larger than the detail the source photo holds. Results are cached: the source never changes."""

    def __init__(self, source: SourceFace, upscaler_factory: Callable[[], object] | None,
                 max_steps: int = 2) -> None:
        self.source = source
        # Jobs of one engine share the texture: a crop is made once, and the swapper's caches keyed by its id stay
        # valid (two jobs racing to make one would leave the loser's id to be reused by another array).
        self._lock = threading.Lock()
        self._factory = upscaler_factory
        self._upscaler = None
        self.max_steps = max_steps
        self._scaled: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]] = {}
        self._crops: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._meshes: dict[tuple[int, int], np.ndarray | None] = {}

    def steps_for(self, target_face_size: float) -> int:
        if self._factory is None:
            return 0
        ratio = target_face_size / max(self.source.face.size, 1.0)
        if ratio <= 1.15:
            return 0
        return int(min(self.max_steps, math.ceil(math.log2(ratio))))

    def _image(self, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """(image, 68 landmarks, kps5, 468-point mesh or None) of the source region at 2**steps scale."""
        if steps not in self._scaled:
            face = self.source.face
            if steps == 0:
                self._scaled[0] = (self.source.image_srgb, face.landmarks68, face.kps5, face.mesh468)
            else:
                # Upscale only a generous region around the face: the crop never reaches further.
                img = self.source.image_srgb
                h, w = img.shape[:2]
                cx, cy = face.centre
                half = face.size * 1.4
                x0, y0 = int(max(cx - half, 0)), int(max(cy - half, 0))
                x1, y1 = int(min(cx + half, w)), int(min(cy + half, h))
                if self._upscaler is None:
                    self._upscaler = self._factory()
                big = self._upscaler.upscale(img[y0:y1, x0:x1], steps)
                k = 2**steps
                offset = np.array([x0, y0], np.float64)
                # pixel centres: x_big = (x + 0.5) * k - 0.5
                lm = (face.landmarks68 - offset + 0.5) * k - 0.5
                kp = (face.kps5 - offset + 0.5) * k - 0.5
                mesh = None
                if face.mesh468 is not None:
                    mesh = np.asarray(face.mesh468, np.float64).copy()
                    mesh[:, :2] = (mesh[:, :2] - offset + 0.5) * k - 0.5
                    mesh[:, 2:] *= k
                self._scaled[steps] = (big, lm, kp, mesh)
        return self._scaled[steps]

    def get(self, size: int, target_face_size: float) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            return self._get(size, target_face_size)

    def _get(self, size: int, target_face_size: float) -> tuple[np.ndarray, np.ndarray]:
        steps = self.steps_for(target_face_size)
        key = (steps, size)
        if key not in self._crops:
            img, lm, kp, mesh = self._image(steps)
            m = crop_matrix(kp, FFHQ_TEMPLATE, size)
            crop = warp_crop(img, m, size, sharp=True)  # bicubic: the source's detail is what the face keeps
            lm_crop = transform_points(m, lm)
            # its glasses off: a plate face without them must not take the frame's rims (source_glasses)
            crop, _ = source_glasses.take_off(crop, lm_crop, track_models.plate_px(m))
            self._crops[key] = (crop, geometry68.with_forehead(lm_crop))
            self._meshes[key] = None if mesh is None else mesh_warp.to_crop(mesh, m)
        return self._crops[key]

    def mesh(self, size: int, target_face_size: float) -> np.ndarray | None:
        """The source's (468, 3) mesh in the crop ``get`` gives for the same arguments (None without a mesh)."""
        with self._lock:
            self._get(size, target_face_size)
            return self._meshes[(self.steps_for(target_face_size), size)]


# Photos whose head turns (geometry68.turn) differ by less than this are one view, painted by the largest face of
# them (resolution counts for more than a few degrees: the frontal photos read -0.04 to 0.0).
VIEW_GAP = 0.15
# Half the turn range over which a target between two views cross-fades from one to the other.
VIEW_FADE = 0.08
MIN_VIEW_WEIGHT = 1e-3  # a view's share under this is left out (and the other's made whole)


class SourceViews:
    """The source photos as views of one head: per target face, the photo whose head turn is nearest the target's
    paints it (a 3/4 view for a turned target, which a frontal photo warped flat cannot give: its far cheek is
    squeezed and its matte stops short of the near one), cross-faded over VIEW_FADE either side of the midpoint
    between two views. One photo, or photos that all look the same way: the largest face, as before."""

    def __init__(self, faces: list[SourceFace], upscaler_factory: Callable[[], object] | None,
                 max_steps: int = 2) -> None:
        if not faces:
            raise ValueError("SourceViews needs at least one source face")
        kept: list[tuple[float, SourceTexture]] = []
        for face in sorted(faces, key=lambda f: -f.face.size):
            t = geometry68.turn(face.face.landmarks68)
            if all(abs(t - other) >= VIEW_GAP for other, _ in kept):
                # the factory is the registry's, which shares one upscaler per runtime between the views
                kept.append((t, SourceTexture(face, upscaler_factory, max_steps)))
        kept.sort(key=lambda k: k[0])
        self.turns = [t for t, _ in kept]
        self.textures = [tex for _, tex in kept]

    def weights(self, turn: float) -> list[tuple[float, int]]:
        """(weight, view index) of the views that paint a target of head turn ``turn``; weights sum to 1."""
        ts = self.turns
        if not math.isfinite(turn):  # no turn to go by: the frontal-most view
            return [(1.0, int(np.argmin(np.abs(ts))))]
        k = int(np.searchsorted(ts, turn))
        if k == 0 or k == len(ts):
            return [(1.0, min(k, len(ts) - 1))]
        lo, hi = ts[k - 1], ts[k]
        half = min(VIEW_FADE, (hi - lo) / 2)
        u = float(np.clip((turn - (lo + hi) / 2) / (2 * half) + 0.5, 0.0, 1.0))
        w = u * u * (3.0 - 2.0 * u)
        if w < MIN_VIEW_WEIGHT or w > 1.0 - MIN_VIEW_WEIGHT:  # a second warp for no visible change
            return [(1.0, k if w > 0.5 else k - 1)]
        return [(1.0 - w, k - 1), (w, k)]

    def get(self, size: int, target_face_size: float, turn: float = 0.0) -> list[SourceView]:
        """The views for a target crop of ``size`` px, a face ``target_face_size`` plate px wide, turned ``turn``."""
        out: list[SourceView] = []
        for w, i in self.weights(turn):
            tex = self.textures[i]
            crop, pts = tex.get(size, target_face_size)
            out.append(SourceView(w, crop, pts, tex.mesh(size, target_face_size)))
        return out

    def steps_for(self, target_face_size: float, turn: float = 0.0) -> int:
        """Super-resolution steps a face of this size and head turn takes (the most of the views that paint it)."""
        return max(self.textures[i].steps_for(target_face_size) for _, i in self.weights(turn))
