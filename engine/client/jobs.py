"""Jobs from the client's side: images into slots, submissions, and results read back from slots."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import protocol, transport
from .errors import EngineClientError
from .handle import JobHandle
from .state import HELD, ClientState

KEEP_IDLE_SLOTS = 4  # idle slots kept for the next request; smaller extras go back to the engine


@dataclass
class ImageRef:
    """A file (``path``) or pixels (float32 (H, W, 3|4), top row first) with their colour space."""

    path: str | None = None
    pixels: np.ndarray | None = None
    colorspace: str = "auto"
    name: str = ""



def _carried(consent: list[dict[str, str]] | None) -> dict[str, Any]:
    """The request field of the consent records a job carries (issue 14: those saved with a .blend)."""
    return {} if consent is None else {"consent": [dict(r) for r in consent]}


class JobRequests(ClientState):
    """Submitting jobs, the slots their pixels travel in, and building each kind's result."""

    # ------------------------------------------------------------------------------------------- slots

    def _acquire_slot(self, nbytes: int, exclude: set[str]) -> transport.PoolEntry:
        entry = self._slots.pick(HELD, min_bytes=nbytes, exclude=exclude)
        if entry is not None:
            return entry
        reply = self._request("slot_alloc", nbytes=nbytes)
        return self._slots.add(self._attach(reply["slot"]), holder=HELD)

    def _attach(self, name: str) -> transport.Slot:
        try:
            return transport.Slot.attach(name)
        except transport.SlotError as exc:
            raise EngineClientError(str(exc)) from None

    def pixel_buffer(self, height: int, width: int, channels: int = 4) -> np.ndarray:
        """A float32 (height, width, channels) array that lives in a shared-memory slot. Fill it (e.g.
        ``image.pixels.foreach_get(buf.ravel())`` then flip rows) and pass it as a plate or source: it
        is sent without another copy. One submission per buffer; ask for a new one for the next job."""
        entry = self._acquire_slot(height * width * channels * 4, set())
        buf = entry.slot.array((height, width, channels), np.float32)
        with self._lock:
            self._buffers[entry.slot.name] = buf.__array_interface__["data"][0]
        return buf

    def _buffer_slot(self, pixels: np.ndarray) -> transport.PoolEntry | None:
        """The slot whose payload ``pixels`` is (a ``pixel_buffer``), or None. Handed to this job."""
        if not pixels.flags.c_contiguous:
            return None
        addr = pixels.__array_interface__["data"][0]
        with self._lock:
            for name, start in self._buffers.items():
                entry = self._slots.get(name)
                if entry is not None and start == addr and pixels.nbytes <= entry.slot.capacity:
                    del self._buffers[name]
                    return entry
        return None

    def _result_slot(self, exclude: set[str]) -> str | None:
        """A free slot for the engine to write a result into (the largest), or None (engine makes one)."""
        entry = self._slots.pick(HELD, exclude=exclude, largest=True)
        return entry.slot.name if entry is not None else None

    def _forget(self, job: JobHandle) -> None:
        """A finished job whose events were consumed: the client no longer tracks it."""
        with self._lock:
            self._jobs.pop(job.id, None)

    def _release(self, names: list[str]) -> None:
        self._slots.release(names)

    def _image(self, image: Any, held: list[str], what: str) -> dict[str, Any]:
        if isinstance(image, ImageRef):
            ref = image
        elif isinstance(image, np.ndarray):
            ref = ImageRef(pixels=image)
        elif isinstance(image, (str, os.PathLike)):
            ref = ImageRef(path=os.fspath(image))
        else:
            raise TypeError(f"{what} must be a path, a numpy array or an ImageRef, not {type(image).__name__}")
        if ref.pixels is None:
            if not ref.path:
                raise ValueError(f"{what}: an ImageRef needs a path or pixels")
            return {"path": os.path.abspath(ref.path), "colorspace": ref.colorspace, "name": ref.name}
        pixels = np.asarray(ref.pixels)
        if pixels.ndim != 3 or pixels.shape[2] not in (3, 4):
            raise ValueError(f"{what}: pixels must be (height, width, 3 or 4), got shape {pixels.shape}")
        if pixels.dtype != np.float32:
            pixels = pixels.astype(np.float32)
        entry = self._buffer_slot(pixels)
        if entry is None:
            entry = self._acquire_slot(pixels.nbytes, set(held))
            entry.slot.write(pixels)
        held.append(entry.slot.name)
        gen = entry.slot.bump()
        return {"slot": entry.slot.name, "gen": gen, "shape": list(pixels.shape), "dtype": "float32",
                "colorspace": ref.colorspace, "name": ref.name}


    # -------------------------------------------------------------------------------------------- jobs

    def _finish_job(self, job: JobHandle, ev: dict[str, Any]) -> dict[str, Any]:  # reader thread
        held, job._slots = job._slots, []
        result = ev.get("result") or {}
        try:
            if ev["type"] == "done":
                job.result = protocol.JOB_KINDS[job.kind].build_result(ev, self._read_layers(job, result))
        except (EngineClientError, transport.SlotError, protocol.ProtocolError) as exc:
            ev = {"type": "error", "message": f"cannot read the result: {exc}"}
        finally:
            if result.get("replaced"):
                self._slots.drop(result["replaced"])  # the engine made a bigger one; ours is closed
            self._release(held + ([result["slot"]] if result.get("slot") else []))
            extras = self._slots.trim(KEEP_IDLE_SLOTS)
            for name in extras:
                self._send_nowait("slot_free", slot=name)
        return ev

    def _read_layers(self, job: JobHandle, result: dict[str, Any]) -> dict[str, np.ndarray]:
        """The result's pixel layers, from the slot the engine wrote them into (copies unless copy=False)."""
        layers: dict[str, np.ndarray] = {}
        name = result.get("slot")
        if not name:
            return layers
        entry = self._slots.get(name)
        if entry is None:
            entry = self._slots.add(self._attach(name))
        entry.slot.check_generation(int(result["gen"]))
        for layer in protocol.check_layers(result, entry.slot.capacity):
            view = entry.slot.array(layer["shape"], layer["dtype"], layer["offset"])
            layers[layer["name"]] = view.copy() if job._copy else view
            del view
        return layers

    def _submit_job(self, op: str, build: Any, copy: bool = True) -> JobHandle:
        """Submit ``op`` with the fields ``build(held)`` makes (it puts pixels into slots, listed in ``held``),
        plus a slot for the result where the kind's result carries pixels; slots are released if anything
        fails."""
        held: list[str] = []
        try:
            fields = build(held)
            if protocol.JOB_KINDS[op].pixels_back:
                fields["out_slot"] = self._result_slot(set(held))
                if fields["out_slot"]:
                    held.append(fields["out_slot"])
        except BaseException:
            self._release(held)
            raise
        return self._submit_with(op, held, copy, **fields)

    def _images(self, plate: Any, sources: list[Any], held: list[str]) -> dict[str, Any]:
        return {"plate": self._image(plate, held, "plate"),
                "sources": [self._image(s, held, f"sources[{i}]") for i, s in enumerate(sources)]}

    def render(self, plate: Any, sources: list[Any], output_dir: str, settings: dict[str, Any] | None = None,
               frame_start: int | None = None, frame_end: int | None = None, *, skip_existing: bool = False,
               file_prefix: str = "facefusion", consent: list[dict[str, str]] | None = None,
               analysis_file: str | None = None) -> JobHandle:
        """Render frames of ``plate`` into one EXR per frame in ``output_dir`` (must be under an allowed
        output root of the engine). Events: see ``protocol.EVENT_TYPES``; the last is done, error or cancelled.
        ``analysis_file``: a farm chunk's shot analysis, read and never computed (missing or stale: an error)."""
        # Absolute, but ".." left for the engine to resolve with the symlinks: collapsing it as text (abspath)
        # changes which folder "link/.." means.
        out = os.path.join(os.getcwd(), os.fspath(output_dir))
        job = self._submit_job("render", lambda held: {
            **self._images(plate, sources, held), "output_dir": out, "settings": dict(settings or {}),
            "frame_start": frame_start, "frame_end": frame_end, "skip_existing": skip_existing,
            "file_prefix": file_prefix, **_carried(consent),
            **({"analysis_file": os.path.abspath(analysis_file)} if analysis_file else {})})
        job.output_dir = os.path.realpath(out)
        return job

    def preview(self, plate: Any, sources: list[Any], frame: int, settings: dict[str, Any] | None = None,
                *, copy: bool = True, consent: list[dict[str, str]] | None = None,
                analysis_window: int = 0) -> JobHandle:
        """One frame swapped, back as pixels (no file). ``job.wait()`` → PreviewFrame. ``analysis_window`` N: where
        the shot is not analysed yet, from the frames within N of ``frame`` only (``PreviewFrame.window``)."""
        return self._submit_job("preview", lambda held: {**self._images(plate, sources, held), "frame": int(frame),
                                                      "settings": dict(settings or {}), **_carried(consent),
                                                      "analysis_window": int(analysis_window)}, copy)

    def analyse(self, plate: Any, frame: int, settings: dict[str, Any] | None = None) -> JobHandle:
        """The faces in one frame. ``job.wait()`` → [{"index", "box", "landmarks", "embedding", "thumbnail"}]."""
        return self._submit_job("analyse", lambda held: {"plate": self._image(plate, held, "plate"),
                                                      "frame": int(frame), "settings": dict(settings or {})})

    def source_faces(self, sources: list[Any], settings: dict[str, Any] | None = None) -> JobHandle:
        """What a bake with ``settings`` finds in each source photo. ``job.wait()`` → {"photos": [{"photo", "width",
        "height", "faces", "boxes", "used" (index, or None without a face), "detector", "hint"?}]}."""
        return self._submit_job("source_faces", lambda held: {
            "sources": [self._image(s, held, f"sources[{i}]") for i, s in enumerate(sources)],
            "settings": dict(settings or {})})

    def submit_echo(self, pixels: np.ndarray, *, copy: bool = True) -> JobHandle:
        return self._submit_job("echo", lambda held: {"image": self._image(pixels, held, "image")}, copy)

    def echo(self, pixels: np.ndarray, *, copy: bool = True, timeout: float | None = 60.0) -> np.ndarray:
        """Send pixels through shared memory and get the engine's unchanged copy back. ``copy=False`` returns
        a view of the result slot, valid until the next request."""
        return self.submit_echo(pixels, copy=copy).wait(timeout)

    def cancel(self, job_id: int) -> dict[str, Any]:
        return self._request("cancel", job=int(job_id))

    def status(self) -> dict[str, Any]:
        return self._request("status")

    def ping(self, timeout: float = 5.0) -> float:
        t0 = time.perf_counter()
        self._request("ping", timeout=timeout)
        return time.perf_counter() - t0

    def shutdown(self) -> None:
        """Ask the engine to stop (cancels every client's jobs)."""
        self.close(shutdown=True)

    def poll_events(self) -> list[tuple[JobHandle, dict[str, Any]]]:
        """Every job's new events, without blocking (for a modal operator's timer). Raises EngineDied
        once the engine is gone and everything it sent has been returned; EngineHung while it is stuck."""
        with self._lock:
            jobs = list(self._jobs.values())
        out = []
        for job in jobs:
            out.extend((job, ev) for ev in job._drain())
        if not out:
            self._raise_if_dead()
        return out

