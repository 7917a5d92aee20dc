"""2DFAN4 68-point landmarker: box crop at 256 (scale 195 / box side), heatmap-space points x4, score from maxima.

Pre-processing follows FaceFusion, which converts and distributes ``2dfan4.onnx``: the crop is a bilinear warp
with a black border where the box leaves the frame (not replicated edge pixels: up to 59 px landmark difference
on faces at the frame edge), fed BGR in [0, 1] (the catalogue's ``channels``).
"""

from __future__ import annotations

import cv2
import numpy as np

from engine.stages.align import invert, transform_points
from engine.stages.contracts import Face, kps5_from_68
from engine.stages.onnx_io import NeuralBackend, to_tensor, u8_to_unit


def box_crop_matrix(box: np.ndarray, size: int, scale_num: float) -> np.ndarray:
    """Frame -> crop matrix that centres the box and scales its longer side to ``scale_num`` px."""
    w, h = float(box[2] - box[0]), float(box[3] - box[1])
    s = scale_num / max(w, h, 1.0)
    cx, cy = (box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0
    return np.array([[s, 0.0, size / 2.0 - s * cx], [0.0, s, size / 2.0 - s * cy]])


def brighten_if_dark(crop_u8: np.ndarray) -> np.ndarray:
    """CLAHE on L when the crop is very dark (mean L < 30), as the model was trained on lit faces.

    Call it on the crop in the model's channel order: FaceFusion runs this RGB->Lab conversion on its BGR crop,
    so the same pixels (and the same threshold decision) need the same channel order here.
    """
    lab = cv2.cvtColor(crop_u8, cv2.COLOR_RGB2Lab)
    if lab[..., 0].mean() >= 30:
        return crop_u8
    lab[..., 0] = cv2.createCLAHE(clipLimit=2.0).apply(lab[..., 0])
    return cv2.cvtColor(lab, cv2.COLOR_Lab2RGB)


class Fan68Landmarker(NeuralBackend):
    def landmarks(self, frame_u8: np.ndarray, faces: list[Face]) -> None:
        if not faces:
            return
        size = int(self.spec.get("size", 256))
        bgr = self.spec.get("channels", "RGB") == "BGR"
        mats, crops = [], []
        for f in faces:
            m = box_crop_matrix(f.box, size, float(self.spec.get("crop_scale", 195)))
            crop = cv2.warpAffine(frame_u8, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                                  borderValue=(0, 0, 0))
            if bgr:  # to_tensor expects RGB and reorders per the spec: brighten in model order, then back
                crop = brighten_if_dark(crop[..., ::-1])[..., ::-1]
            else:
                crop = brighten_if_dark(crop)
            crops.append(u8_to_unit(crop))
            mats.append(m)
        x = to_tensor(np.stack(crops), self.spec)
        pts, heat = self.session.run_batched({self.input_name("input"): x})[:2]
        hm = heat.shape[-1]
        for f, m, p, h in zip(faces, mats, pts, heat, strict=True):
            crop_pts = np.asarray(p)[:, :2] * (size / hm)
            f.landmarks68 = transform_points(invert(m), crop_pts)
            score = float(np.interp(np.amax(h, axis=(1, 2)).mean(), [0.0, 0.9], [0.0, 1.0]))
            if f.kps5 is None or score >= float(self.options.get("score", 0.5)):
                f.kps5 = kps5_from_68(f.landmarks68)


BACKEND = Fan68Landmarker  # found by the registry: catalogue backend "2dfan4"
