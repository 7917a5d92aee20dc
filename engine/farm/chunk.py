"""A farm render chunk: ``python -m engine swap --analysis FILE --frames A-B ...``.

The chunk reads the shot analysis its job's analysis task wrote and never analyses (a missing or stale file is an
error, exit 2), so every chunk makes the frames one machine would. A retried chunk keeps the frames its earlier
attempt finished, when they are this job's (written after the analysis file, with the same settings, sources and
engine); every frame is written atomically, so no attempt leaves half a file.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import threading
from typing import Any

from engine import __version__
from engine import settings as schema
from engine.analysis import ShotAnalysis
from engine.errors import EngineError
from engine.farm import shot_file
from engine.io import bounded_json
from engine.io.files import open_regular
from engine.io.plates import Plate
from engine.job import EventSink, ImageInput, SwapJob
from engine.pipeline import Engine

PHOTO_EXTENSIONS = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".exr", ".webp", ".bmp")


def load_settings_file(path: str) -> dict[str, Any]:
    """A JSON object of settings (names as in the settings schema); checked here so a bad file names itself."""
    try:  # a FIFO or a folder is named, never waited on; NaN, Infinity and deep nesting are refused
        fd = open_regular(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            values = bounded_json.loads(fh.read(1 << 20))
    except OSError as exc:
        raise EngineError(f"cannot read the settings file '{path}' ({exc.strerror or exc})", "check the path") from exc
    except ValueError as exc:
        raise EngineError(f"the settings file '{path}' is not JSON ({exc})", "write it as a JSON object") from exc
    if not isinstance(values, dict):
        raise EngineError(f"the settings file '{path}' is a JSON {type(values).__name__}, not an object",
                          "write it as a JSON object of settings")
    try:
        schema.validate(values)
    except schema.SettingsError as exc:
        raise EngineError(f"the settings file '{path}': {exc}", "fix the file and run again") from exc
    return dict(values)


def expand_sources(sources: list[ImageInput]) -> list[ImageInput]:
    """A folder given as a source stands for the photos in it (a farm job declares one source folder)."""
    out: list[ImageInput] = []
    for src in sources:
        if src.path and os.path.isdir(src.path):
            photos = sorted(f for f in os.listdir(src.path) if f.lower().endswith(PHOTO_EXTENSIONS)
                            and not f.startswith("."))
            if not photos:
                raise EngineError(f"the source folder '{src.path}' holds no photo",
                                  f"put photos ({', '.join(PHOTO_EXTENSIONS)}) of the new face in it")
            out += [dataclasses.replace(src, path=os.path.join(src.path, f)) for f in photos]
        else:
            out.append(src)
    return out


class ChunkEngine(Engine):
    """An engine whose shot analysis comes from one file, never from the analysis pass or the per-user cache."""

    def __init__(self, analysis_path: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.analysis_path = analysis_path

    def shot_analysis(self, plate: Plate, s: Any, emit: EventSink = lambda e: None,
                      check_cancel: Any = lambda: None, workers: int | None = None, keep: bool = True
                      ) -> ShotAnalysis:
        return shot_file.read(self.analysis_path, plate, s)  # the job's file, whatever asks (``keep``: no matter)

    def run(self, job: SwapJob, on_event: EventSink = lambda e: None,
            cancel: threading.Event | None = None) -> dict:
        shot_file.check_present(self.analysis_path)  # before the source photos are analysed: fail fast
        if job.skip_existing and not self._existing_are_this_jobs(job):
            job = dataclasses.replace(job, skip_existing=False)  # another job's frames: all made again
        return super().run(job, on_event, cancel)

    def _existing_are_this_jobs(self, job: SwapJob) -> bool:
        """Whether every finished frame of the chunk's range in the output folder came from this job."""
        if job.output_dir is None:
            return False
        try:
            s = schema.validate(job.settings)
        except schema.SettingsError:
            return False  # the render itself reports the bad setting
        want = {"facefusion:settings": schema.canonical_json(s), "facefusion:engine_version": __version__}
        first, last = job.frame_start, job.frame_end
        since = os.stat(self.analysis_path).st_mtime
        existing = []
        for path in glob.glob(os.path.join(glob.escape(str(job.output_dir)), f"{glob.escape(job.file_prefix)}.*.exr")):
            frame = path.rsplit(".", 2)[-2]
            if frame.lstrip("-").isdigit() and (first is None or int(frame) >= first) and (
                    last is None or int(frame) <= last):
                existing.append(path)
        if not existing:
            return True
        want["facefusion:source_identity"] = self.source_identity(job.sources, lambda e: None, s).digest
        for path in existing:
            attrs = _exr_attributes(path)
            if attrs is None or os.stat(path).st_mtime < since or any(attrs.get(k) != v for k, v in want.items()):
                return False
        return True


def reading_analysis(engine: Engine, analysis_path: str) -> ChunkEngine:
    """``engine`` (the engine server's one, shared by its workers) for one render request that names a shot analysis
    file: the same models, caches and locks, the analysis from the file. A view, not a copy; the runtime is made
    first, so the view never makes a second one."""
    engine.runtime()
    view = ChunkEngine.__new__(ChunkEngine)
    view.__dict__.update(engine.__dict__)
    view.analysis_path = os.path.abspath(analysis_path)
    return view


def _exr_attributes(path: str) -> dict[str, str] | None:
    """The string attributes of an EXR's header (no pixels read); None when it cannot be opened."""
    import OpenImageIO as oiio  # the engine's image library, loaded by every render anyway

    inp = oiio.ImageInput.open(path)
    if inp is None:
        oiio.geterror()
        return None
    try:
        return {a.name: a.value for a in inp.spec().extra_attribs if isinstance(a.value, str)}
    finally:
        inp.close()


def swap_engine(analysis: str | None, settings_file: str | None, job: SwapJob, **engine_options: Any) -> Engine:
    """The engine for ``swap``: the settings file under the flags, a source folder expanded, and a chunk engine
    when the render reads a farm job's shot analysis."""
    if settings_file:
        job.settings = {**load_settings_file(settings_file), **job.settings}
    job.sources = expand_sources(job.sources)
    if analysis:
        return ChunkEngine(os.path.abspath(analysis), **engine_options)
    return Engine(**engine_options)
