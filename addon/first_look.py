"""The first look of a UI bake: a preview of the bake's first frame while the engine still analyses the shot.

A bake of a shot without a shot analysis shows nothing until the engine has analysed the whole plate (tens of seconds
for a few hundred frames). So before the bake's job the UI asks the engine for a preview of the first frame the bake
makes, with ``analysis_window``: where the shot is not analysed yet, the engine looks at the frames within WINDOW of
it only, and says so. That image goes to the panel, marked as a preview: it is never written to the cache and the
strip never shows it; the baked frame replaces it (the image goes once that frame lands, or the bake ends). Where the
shot is analysed already, the answer would be the final frame, which the bake makes at once: nothing is shown.

Its job runs before the bake's (never beside it: the engine analyses one plate at a time, and the shot's analysis
would hold the look back until it is done).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import bpy

from . import compat, frame_warnings, images, session

WINDOW = 4  # frames each side of the first frame that the look analyses: 9 frames, seconds on a CPU


@dataclass
class FirstLook:
    item: Any  # the bake.TargetBake whose first frame it shows; its engine job waits for the look
    frame: int  # that plate frame
    job: Any = None
    result: Any = None  # the engine's PreviewFrame, when made from the frames near it (not the final pixels)
    over: bool = False  # came back, failed or was dropped: the bake's job may go
    image: str = ""  # the Blender image showing it ('' when not shown)
    before: str = ""  # the image the panel showed before, given back when the look goes

    def gate(self, item: Any) -> bool:
        """The bake run's gate (BakeRun.gate): False while the look holds ``item``'s job back. Never blocks."""
        if item is not self.item or self.over:
            return True
        try:
            sess = session.get()
            if self.job is None:
                req = item.request
                settings = {**req["settings"], "output_mode": "composite"}  # shown as the artist sees the frame
                self.job = sess.submit_preview(req["plate"], req["sources"], self.frame, settings,
                                               req.get("consent"), WINDOW)
                return False
            result = sess.preview_result(self.job)
            if result is None:
                return False
            self.result = result if getattr(result, "window", False) else None
        except Exception as exc:  # the look is a nicety: the bake goes on and reports engine trouble itself
            print(f"Face Fusion: no first look: {exc}", file=sys.stderr)
        self.over = True
        return True

    def drop(self) -> None:
        """The bake ended before the look came back: stop its job (it writes nothing either way)."""
        if self.job is not None and not self.over:
            try:
                session.get().cancel(self.job)
            except Exception:  # an engine gone or the job over: nothing left to stop
                pass
        self.over = True

    def _where(self) -> str:
        scene = frame_warnings.scene_frames(self.item, self.frame)  # said in scene frames, as every message
        return f"frame {scene[0]}" if scene else f"plate frame {self.frame}"

    def shown_text(self) -> str:
        return f"Preview of {self._where()} while the shot is analysed: the baked frame replaces it"

    def waiting_text(self) -> str:
        """The bake's progress line while the look is made ('' once it is back)."""
        return "" if self.over else f"Face Fusion: a quick preview of {self._where()} first"

    def update(self, runtime: Any) -> None:
        """Main thread, each tick of the bake: show the look once it is back, take it away once its frame is baked
        or the bake is over."""
        if self.result is not None and not self.image and not self.item.finished and self.frame not in self.item.done:
            ff = self.item.target.settings
            self.before = ff.preview_image.name if ff.preview_image is not None else ""
            image = images.image_from_pixels(image_name(self.item.target), self.result.rgba,
                                             compat.linear_colorspace_name())
            self.image, ff.preview_image = image.name, image
            runtime.first_look = self.shown_text()
        elif self.image and (self.frame in self.item.done or self.item.finished):
            self.remove(runtime)

    def remove(self, runtime: Any) -> None:
        """Take the look away: the panel shows what it showed before; the image is deleted."""
        runtime.first_look = ""
        name, self.image, self.result = self.image, "", None
        image = bpy.data.images.get(name) if name else None
        if image is None:
            return
        ff = self.item.target.settings
        if ff.preview_image == image:
            ff.preview_image = bpy.data.images.get(self.before) if self.before else None
        bpy.data.images.remove(image)


def image_name(target: Any) -> str:
    """The Blender image of a target's first look."""
    return f"FF First Look {target.owner.name}"


def for_run(items: list[Any]) -> FirstLook | None:
    """The look for a UI bake: the first target that has frames for the engine to make, at its first frame."""
    item = next((i for i in items if i.engine_frames and i.request), None)
    return None if item is None else FirstLook(item, min(item.engine_frames))
