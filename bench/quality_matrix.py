"""Issue 33's fixed matrix: seven plate/source pairs from ../shared/data, each rendered with a real
``python -m engine swap --composite`` and measured with ``python -m engine quality --reference poisson`` on that
render (``--render``), with 3x contact sheets. Prints and writes a markdown table of per-pair figures and their
spread across the pairs.

    .venv/bin/python bench/quality_matrix.py [--out /tmp/quality_matrix] [--data ../shared/data] [--pairs a,b]

The data is read where it lies (never copied into the repository); everything written goes under ``--out``. A
second run (say, after a killed one) reuses the EXRs already rendered (``swap --skip-existing``) and the pairs
already measured (their ``report/figures.json``): delete ``--out`` to render and measure afresh.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _shared_data() -> str:
    """The shared data folder the tests use (beside the checkout, the workplace's, or $FACE_FUSION_SHARED_DATA)."""
    sys.path.insert(0, ROOT)
    from tests import shared_data

    return shared_data.DATA
# A render needs consent per source identity (issue 14): the matrix confirms it for these internal test photos, in a
# store of its own under --out, never the user's.
CONSENT = "issue 33 quality matrix: ../shared/data test footage, internal measurement only"


@dataclass(frozen=True)
class Pair:
    slug: str
    plate: str  # relative to the data folder
    frames: str
    source: str


MATRIX = [
    Pair("walkers", "walkers_1080p.mp4", "40-63", "photos/paul_rudd.jpg"),
    Pair("w023_dark_skin", "clips/mead_w023_dark_skin_frontal.mp4", "1-24", "photos/deca_1_east_asian_woman.jpg"),
    Pair("w040_laughing", "clips/mead_w040_laughing.mp4", "40-63", "photos/deepface_img41_older_grey_beard.jpg"),
    Pair("m026_grimaces", "clips/mead_m026_grimaces.mp4", "30-53", "photos/compreface_face2_glasses_goatee.jpg"),
    Pair("d12_glasses", "clips/liveportrait_d12_glasses_wide_mouth.mp4", "1-24", "photos/shea_whigham.jpg"),
    Pair("d13_selfie", "clips/liveportrait_d13_selfie_portrait.mp4", "100-123", "photos/angelina_jolie.jpg"),
    Pair("conan_webcam", "clips/fsgan_conan_webcam_1080p.mp4", "1-24", "photos/deepface_img24_glasses_beard_blue.jpg"),
]

# (report key, column title): the figures the table shows per pair; each key is one of the report's figures. A
# colour figure is shown as "figure / the plate's floor", marked met ("<=") when it is not above its floor.
FLOORED = {"dE00 median": "dE00 floor median", "dC median": "dC floor median", "dH median": "dH floor median"}
COLUMNS = [
    ("faces", "faces"), ("coverage", "coverage"),
    ("dE76 median", "dE76 med"), ("dE76 p90", "dE76 p90"),
    ("dE00 median", "dE00 med / floor"), ("dC median", "dC med / floor"), ("dH median", "dH med / floor"),
    ("edge ratio", "edge"), ("flicker ratio", "flicker"), ("sharpness ratio", "sharp"),
    ("closer to source", "closer"), ("expression error", "expr"),
    ("nasolabial lines", "nasolabial"), ("crow's feet lines", "crow's feet"), ("forehead lines", "forehead"),
    ("texture ratio", "texture"), ("texture change ratio", "texture change"),
    ("iris hue error", "iris hue deg"), ("iris chroma ratio", "iris chroma"), ("iris level", "iris dL*"),
]


def commit() -> str:
    out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "engine"],
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + (" (engine/ edited, uncommitted)" if dirty else "")


def run(cmd: list[str], log: str, env: dict[str, str]) -> float:
    """Run one engine command from the repository root, its output appended to ``log``; returns its wall time.
    A failing command stops the matrix: a pair measured on a broken render would be a wrong row."""
    t0 = time.monotonic()
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"'{' '.join(cmd)}' exited {proc.returncode}; see {log}")
    return time.monotonic() - t0


def commands(pair: Pair, data: str, out: str) -> tuple[list[str], list[str]]:
    plate, source = os.path.join(data, pair.plate), os.path.join(data, pair.source)
    render, report = os.path.join(out, pair.slug, "render"), os.path.join(out, pair.slug, "report")
    swap = [sys.executable, "-m", "engine", "swap", "--source", source, "--target", plate, "--frames", pair.frames,
            "--composite", "--consent", CONSENT, "--skip-existing", "--quiet", "--output", render]
    quality = [sys.executable, "-m", "engine", "quality", "--source", source, "--target", plate, "--frames",
               pair.frames, "--reference", "poisson", "--render", render, "--zoom", "3", "--output", report]
    return swap, quality


def fmt(v: object) -> str:
    if isinstance(v, float):
        return "nan" if not np.isfinite(v) else f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def table(rows: dict[str, dict[str, float]], run_name: str) -> list[str]:
    """Markdown: one line per pair that has ``run_name`` (a pair without faces under 60 px has no such rows), its
    figures, then the spread (min, median, max) across them."""
    rows = {slug: figs for slug, figs in rows.items() if run_name in figs}
    lines = ["| pair | " + " | ".join(t for _, t in COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    def cell(fig: dict[str, float], key: str) -> str:
        v = fig.get(key, float("nan"))
        if key not in FLOORED:
            return fmt(v)
        floor = fig.get(FLOORED[key], float("nan"))
        return f"{fmt(v)} / {fmt(floor)}" + (" <=" if v <= floor else "")

    for slug, figs in rows.items():
        fig = figs.get(run_name, {})
        lines.append(f"| {slug} | " + " | ".join(cell(fig, k) for k, _ in COLUMNS) + " |")
    for label, fn in (("min", np.nanmin), ("median", np.nanmedian), ("max", np.nanmax)):
        cells = []
        for key, _ in COLUMNS:
            v = np.array([float(f.get(run_name, {}).get(key, np.nan)) for f in rows.values()], np.float64)
            cells.append(fmt(float(fn(v))) if np.isfinite(v).any() else "nan")
        lines.append(f"| **{label}** | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="/tmp/quality_matrix", help="folder for renders, reports and sheets")
    p.add_argument("--data", default=_shared_data(), help="the shared data folder")
    p.add_argument("--table-only", action="store_true", help="no runs: the table from the figures.json files "
                                                             "that an earlier run left under --out")
    p.add_argument("--pairs", help="comma-separated pair names (default: all): " + ", ".join(m.slug for m in MATRIX))
    args = p.parse_args(argv)
    out = os.path.abspath(args.out)
    if os.path.commonpath([out, ROOT]) == ROOT:
        p.error("--out must lie outside the repository (renders and sheets are large)")
    chosen = MATRIX if not args.pairs else [m for m in MATRIX if m.slug in args.pairs.split(",")]
    if not chosen:
        p.error(f"no pair named in '{args.pairs}'")
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "matrix.log")
    env = {**os.environ, "FACE_FUSION_CONSENT_FILE": os.path.join(out, "consent.json")}
    rows: dict[str, dict[str, dict[str, float]]] = {}
    walls: dict[str, tuple[float, float]] = {}
    for pair in chosen:
        if args.table_only:
            with open(os.path.join(out, pair.slug, "report", "figures.json"), encoding="utf-8") as fh:
                rows[pair.slug] = json.load(fh)
            walls[pair.slug] = (float("nan"), float("nan"))
            continue
        swap, quality = commands(pair, os.path.abspath(args.data), out)
        figures = os.path.join(out, pair.slug, "report", "figures.json")
        t_swap = run(swap, log, env)
        t_quality = float("nan") if os.path.exists(figures) else run(quality, log, env)
        with open(figures, encoding="utf-8") as fh:
            rows[pair.slug] = json.load(fh)
        walls[pair.slug] = (t_swap, t_quality)
        print(f"{pair.slug}: swap {t_swap:.0f} s, quality {t_quality:.0f} s", flush=True)
    names = list(next(iter(rows.values())))
    at = "the commit of the run (see matrix.log)" if args.table_only else commit()
    text = [f"# Issue 33 matrix at {at}", "", "Pairs (plate frames <- source), wall seconds swap / quality:", ""]
    text += [f"- {m.slug}: `{m.plate}` {m.frames} <- `{m.source}` ({walls[m.slug][0]:.0f} / {walls[m.slug][1]:.0f} s)"
             for m in chosen]
    for name in names:
        text += ["", f"## {name}", ""] + table(rows, name)
    text += ["", f"Reports, sheets (`faces.png`, `zoom3x/`) and renders: `{out}/<pair>/`.", ""]
    with open(os.path.join(out, "table.md" if args.table_only else "matrix.md"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
