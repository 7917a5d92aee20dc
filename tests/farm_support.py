"""The farm tests' shot: a camera move over two faces of t1.jpg as a linear EXR sequence, and a folder with one
source photo (a farm job declares its source photos as a folder)."""

from __future__ import annotations

from pathlib import Path

from engine import shots


def farm_shot(folder: Path, frames: int, size: tuple[int, int], move: shots.CameraMove) -> dict:
    photo = shots.load_photo_linear("t1")[140:450, 215:725]
    images, _ = shots.render_shot(photo, size, frames, move)
    plate = shots.write_sequence(images, str(folder / "plate"))
    shots.write_photo("astronaut", str(folder / "source"), max_side=320)
    return {"dir": folder, "plate": plate, "source": str(folder / "source")}
