"""Build and validate the Face Fusion extension zip with Blender's own extension tool.

Blender ships its extension builder/validator as a plain-Python script (``blender_ext.py``) inside the
``bpy`` wheel and inside every Blender install, so this runs with any Python 3.11 that can see one of them:

    python packaging/build_extension.py [--blender-ext PATH] [--output-dir dist]

It prints the zip's path on its last line and exits non-zero when Blender's builder or validator refuses
the package, or when something that must stay out (tests, benchmarks, weights) got in.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import subprocess
import sys
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What the zip may hold, and what must never be in it.
ALLOWED_TOP = {"__init__.py", "blender_manifest.toml", "addon", "engine", "models", "requirements"}
FORBIDDEN_PARTS = {"tests", "bench", "packaging", "__pycache__"}
FORBIDDEN_SUFFIXES = (".onnx", ".pth", ".pt", ".dat", ".bin", ".safetensors", ".pyc", ".zip", ".blend")
# Besides the add-on, what Set up Engine needs to create and run the engine from the zip alone: every module of the
# engine, its requirement files (the packages; the data packages installed without dependencies) and the model
# catalogue. The same set blender_manifest.toml's paths_exclude_pattern keeps.
SHIPPED_DATA = {"models/catalogue.json", "requirements/engine.txt", "requirements/data-packages.txt"}


def shipped_files(root: str = ROOT) -> set[str]:
    """Every engine file the zip must hold, as zip names: the engine's modules and SHIPPED_DATA."""
    names = set(SHIPPED_DATA)
    for here, dirs, files in os.walk(os.path.join(root, "engine")):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        rel = os.path.relpath(here, root).replace(os.sep, "/")
        names.update(f"{rel}/{f}" for f in files if f.endswith(".py") and not f.startswith("."))
    return names


def find_blender_ext(explicit: str | None = None) -> tuple[str, str | None]:
    """(blender_ext.py, tags.py or None) from an explicit path, $BLENDER_EXT, or the importable bpy wheel."""
    path = explicit or os.environ.get("BLENDER_EXT")
    scripts_dirs: list[str] = []
    if not path:
        spec = importlib.util.find_spec("bpy")  # locates the wheel without importing Blender
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("blender_ext.py not found: install bpy (pip install bpy==5.0.1), "
                             "or pass --blender-ext <blender>/<ver>/scripts/addons_core/bl_pkg/cli/blender_ext.py")
        for loc in spec.submodule_search_locations:
            scripts_dirs += glob.glob(os.path.join(loc, "*", "scripts"))
        hits = [os.path.join(d, "addons_core", "bl_pkg", "cli", "blender_ext.py") for d in scripts_dirs]
        hits = [h for h in hits if os.path.isfile(h)]
        if not hits:
            raise SystemExit(f"bpy is installed but has no blender_ext.py under {scripts_dirs}")
        path = hits[0]
    path = os.path.abspath(path)
    # .../scripts/addons_core/bl_pkg/cli/blender_ext.py -> .../scripts/modules/_bpy_internal/extensions/tags.py
    scripts = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(path))))
    tags = os.path.join(scripts, "modules", "_bpy_internal", "extensions", "tags.py")
    return path, tags if os.path.isfile(tags) else None


def check_contents(zip_path: str) -> list[str]:
    """What is wrong with the zip's contents: names that should not be there, and shipped engine modules
    that are missing ("missing: NAME"). Empty when the package is clean."""
    bad = []
    shipped = shipped_files()
    with zipfile.ZipFile(zip_path) as zf:
        names = zf.namelist()
    for name in names:
        parts = name.rstrip("/").split("/")
        if parts[0] not in ALLOWED_TOP or FORBIDDEN_PARTS.intersection(parts) or name.endswith(FORBIDDEN_SUFFIXES):
            bad.append(name)
        elif parts[0] in ("models", "engine", "requirements") and not name.endswith("/") and name not in shipped:
            bad.append(name)
    bad += [f"missing: {name}" for name in sorted(shipped - set(names))]
    return bad


def build(output_dir: str, blender_ext: str | None = None, python: str = sys.executable) -> str:
    tool, tags = find_blender_ext(blender_ext)
    with open(os.path.join(ROOT, "blender_manifest.toml"), "rb") as fh:
        manifest = tomllib.load(fh)
    os.makedirs(output_dir, exist_ok=True)
    zip_path = os.path.join(os.path.abspath(output_dir), f"{manifest['id']}-{manifest['version']}.zip")
    if os.path.exists(zip_path):
        os.remove(zip_path)
    tag_args = [f"--valid-tags={tags}"] if tags else []
    run = [python, tool, "build", "--source-dir", ROOT, "--output-filepath", zip_path, *tag_args]
    proc = subprocess.run(run, capture_output=True, text=True)
    if proc.returncode != 0 or not os.path.isfile(zip_path):
        raise SystemExit(f"Blender's extension builder failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    proc = subprocess.run([python, tool, "validate", zip_path, *tag_args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"Blender's extension validator refused {zip_path}:\n{proc.stdout}\n{proc.stderr}")
    bad = check_contents(zip_path)
    if bad:
        raise SystemExit(f"{zip_path} does not hold exactly the extension's files (fix paths_exclude_pattern in "
                         f"blender_manifest.toml or SHIPPED_* in {__file__}): {', '.join(bad)}")
    return zip_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blender-ext", help="path to Blender's blender_ext.py (default: from the bpy wheel)")
    ap.add_argument("--output-dir", help="folder for the zip (default: dist/ in the repository)")
    ap.add_argument("folder", nargs="?", help="the same as --output-dir")
    args = ap.parse_args(argv)
    if args.folder and args.output_dir and args.folder != args.output_dir:
        ap.error(f"two output folders given: {args.folder} and --output-dir {args.output_dir}")
    print(build(args.output_dir or args.folder or os.path.join(ROOT, "dist"), args.blender_ext))
    return 0


if __name__ == "__main__":
    sys.exit(main())
