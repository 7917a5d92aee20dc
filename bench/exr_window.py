"""EXR data windows for the face layer (issue 32 point 4): make windowed variants of a real frame, time the
write full frame vs data window for each compression, and read files back display-window aware.

Run with the engine's Python (OpenImageIO):

    .venv/bin/python bench/exr_window.py variants FRAME.exr OUT_DIR    # pairs <case>_full.exr / <case>_win.exr
    .venv/bin/python bench/exr_window.py bench FRAME.exr [--runs 5]     # CPU time and size per compression
    .venv/bin/python bench/exr_window.py compare A.exr B.exr [...]      # same pixels over the display window?
    .venv/bin/python bench/exr_window.py readers OUT_DIR                # engine readers on the windowed files

Cases written by ``variants`` (each *_full.exr holds exactly the pixels of its *_win.exr, full data window):
  real      the frame, data window = bounding box of any nonzero channel + MARGIN px
  edge      the frame shifted so its content is cut by the right and bottom edges: window ends at the plate's edge
  empty     no faces: every channel zero; the window is the smallest legal one, 1x1 at (0, 0)
  *_rgba    the same three with R, G, B, A only (what Blender 4.2 is given: addon/rgba_copy.py)

Writes are timed single-threaded (OIIO ``threads``/``exr_threads`` = 1: the machine is shared) with
``time.process_time`` around ImageOutput create/open/write_image/close, as engine/io/exr.py writes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import OpenImageIO as oiio

MARGIN = 4
COMPRESSIONS = ["none", "rle", "zips", "zip", "piz", "pxr24", "b44", "dwaa", "dwab"]


def read_full(path: str) -> tuple[np.ndarray, oiio.ImageSpec]:
    """float32 (full_height, full_width, C): the display window, zero where the data window has no pixels."""
    inp = oiio.ImageInput.open(path)
    if inp is None:
        raise SystemExit(f"cannot read {path}: {oiio.geterror()}")
    try:
        spec = oiio.ImageSpec(inp.spec())
        px = np.asarray(inp.read_image(0, 0, 0, spec.nchannels, oiio.FLOAT), np.float32)
    finally:
        inp.close()
    px = px.reshape(spec.height, spec.width, spec.nchannels)
    out = np.zeros((spec.full_height, spec.full_width, spec.nchannels), np.float32)
    x0, y0 = spec.x - spec.full_x, spec.y - spec.full_y
    dx0, dy0 = max(x0, 0), max(y0, 0)
    dx1, dy1 = min(x0 + spec.width, spec.full_width), min(y0 + spec.height, spec.full_height)
    if dx1 > dx0 and dy1 > dy0:
        out[dy0:dy1, dx0:dx1] = px[dy0 - y0:dy1 - y0, dx0 - x0:dx1 - x0]
    return out, spec


def content_box(data: np.ndarray, margin: int = MARGIN) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1) around every nonzero value of any channel, plus margin, clipped to the frame."""
    h, w = data.shape[:2]
    nz = np.any(data != 0, axis=2)
    rows, cols = np.flatnonzero(nz.any(axis=1)), np.flatnonzero(nz.any(axis=0))
    if rows.size == 0:
        return None
    return (max(int(cols[0]) - margin, 0), max(int(rows[0]) - margin, 0),
            min(int(cols[-1]) + 1 + margin, w), min(int(rows[-1]) + 1 + margin, h))


def make_spec(src: oiio.ImageSpec, w: int, h: int, names: list[str], box: tuple[int, int, int, int] | None,
              compression: str, half: bool = True) -> oiio.ImageSpec:
    """The engine's spec (engine/io/exr.py): channels, alpha, compression, every string attribute of ``src``;
    with ``box`` the data window is the box (empty content: 1x1 at the origin), the display window w x h."""
    spec = oiio.ImageSpec(w, h, len(names), oiio.HALF if half else oiio.FLOAT)
    spec.channelnames = tuple(names)
    spec.alpha_channel = 3
    spec.attribute("compression", compression)
    for a in src.extra_attribs:
        if isinstance(a.value, str) and a.name not in ("compression",) and not a.name.startswith("oiio:subimage"):
            spec.attribute(a.name, a.value)
    if box is not None:
        x0, y0, x1, y1 = box
        spec.x, spec.y, spec.width, spec.height = x0, y0, x1 - x0, y1 - y0
        spec.full_x, spec.full_y, spec.full_width, spec.full_height = 0, 0, w, h
    return spec


def write(path: str, spec: oiio.ImageSpec, data: np.ndarray) -> None:
    out = oiio.ImageOutput.create(path)
    if out is None or not out.open(path, spec):
        raise SystemExit(f"cannot write {path}: {oiio.geterror()}")
    ok = out.write_image(data)
    if not (out.close() and ok):
        raise SystemExit(f"writing {path} failed: {out.geterror()}")


def write_pair(out_dir: str, case: str, data: np.ndarray, names: list[str], src: oiio.ImageSpec) -> None:
    h, w = data.shape[:2]
    data16 = data.astype(np.float16)
    box = content_box(data16) or (0, 0, 1, 1)
    write(os.path.join(out_dir, f"{case}_full.exr"), make_spec(src, w, h, names, None, "zip"), data16)
    x0, y0, x1, y1 = box
    write(os.path.join(out_dir, f"{case}_win.exr"), make_spec(src, w, h, names, box, "zip"),
          np.ascontiguousarray(data16[y0:y1, x0:x1]))
    print(f"{case:10s} window x={x0} y={y0} {x1 - x0}x{y1 - y0} of {w}x{h} ({(x1 - x0) * (y1 - y0) / (w * h):.1%})")


def cmd_variants(args: argparse.Namespace) -> int:
    data, spec = read_full(args.frame)
    names = list(spec.channelnames)
    os.makedirs(args.out, exist_ok=True)
    h, w = data.shape[:2]
    x0, y0, x1, y1 = content_box(data, 0)
    edge = np.zeros_like(data)  # content shifted right/down so it is cut 20 px inside its box by both edges
    dx, dy = w - x1 + 20, h - y1 + 20
    edge[y0 + dy:, x0 + dx:] = data[y0:h - dy, x0:w - dx]
    cases = {"real": data, "edge": edge, "empty": np.zeros_like(data)}
    plate = np.ones((h, w, 4), np.float16)  # an opaque gradient plate for Alpha Over renders in Blender
    plate[..., 0] = np.linspace(0.05, 0.9, w, dtype=np.float32)[None, :]
    plate[..., 1] = np.linspace(0.9, 0.05, h, dtype=np.float32)[:, None]
    plate[..., 2] = 0.25
    write(os.path.join(args.out, "plate.exr"), make_spec(oiio.ImageSpec(), w, h, names[:4], None, "zip"), plate)
    for case, px in cases.items():
        write_pair(args.out, case, px, names, spec)
        write_pair(args.out, f"{case}_rgba", np.ascontiguousarray(px[..., :4]), names[:4], spec)
    return 0


def compare(a: str, b: str) -> tuple[bool, float, str]:
    pa, sa = read_full(a)
    pb, sb = read_full(b)
    if pa.shape != pb.shape or list(sa.channelnames) != list(sb.channelnames):
        return False, float("inf"), f"shape {pa.shape} vs {pb.shape}, {sa.channelnames} vs {sb.channelnames}"
    diff = float(np.nanmax(np.abs(pa - pb))) if pa.size else 0.0
    same = bool(np.array_equal(pa, pb, equal_nan=True))
    return same, diff, f"{pa.shape[1]}x{pa.shape[0]}x{pa.shape[2]} dw=({sb.x},{sb.y} {sb.width}x{sb.height})"


def cmd_compare(args: argparse.Namespace) -> int:
    bad = 0
    for a, b in zip(args.files[::2], args.files[1::2], strict=True):
        same, diff, info = compare(a, b)
        bad += not same
        print(f"{'SAME' if same else 'DIFF'} max|d|={diff:.3g} {info}  {os.path.basename(a)} vs {os.path.basename(b)}")
    return 1 if bad else 0


def _time_write(spec: oiio.ImageSpec, data: np.ndarray, box: tuple[int, int, int, int] | None,
                tmpdir: str) -> tuple[float, int]:
    path = os.path.join(tmpdir, "t.exr")
    t = time.process_time()
    if box is not None:
        x0, y0, x1, y1 = box
        data = np.ascontiguousarray(data[y0:y1, x0:x1])
    write(path, spec, data)
    cpu = time.process_time() - t
    return cpu, os.path.getsize(path)


def cmd_bench(args: argparse.Namespace) -> int:
    oiio.attribute("threads", 1)
    oiio.attribute("exr_threads", 1)
    full, src = read_full(args.frame)
    names = list(src.channelnames)
    data = full.astype(np.float16)
    h, w = data.shape[:2]
    t = time.process_time()
    for _ in range(args.runs):
        box = content_box(data)
    box_cpu = (time.process_time() - t) / args.runs
    x0, y0, x1, y1 = box
    print(f"frame {w}x{h}x{len(names)} half; window {x1 - x0}x{y1 - y0} at ({x0},{y0}) = "
          f"{(x1 - x0) * (y1 - y0) / (w * h):.1%} of the pixels; bbox from pixels {box_cpu * 1000:.1f} ms "
          f"(not in the write times; the engine knows its face boxes); runs={args.runs}, 1 thread")
    print(f"{'compression':12s} {'full ms':>8s} {'full KiB':>9s} {'win ms':>8s} {'win KiB':>8s} "
          f"{'time -%':>7s} {'size -%':>7s}  round trip max|d| (RGB / mattes)")
    rows = {}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmpdir:
        for comp in COMPRESSIONS:
            res = {}
            for kind, b in (("full", None), ("win", box)):
                spec = make_spec(src, w, h, names, b, comp)
                runs = [_time_write(spec, data, b, tmpdir) for _ in range(args.runs)]
                res[kind] = (statistics.median(r[0] for r in runs), runs[-1][1])
                back, _ = read_full(os.path.join(tmpdir, "t.exr"))
                d = np.abs(back - data.astype(np.float32))
                res[kind + "_err"] = (float(d[..., :3].max()), float(d[..., 3:].max()))
            (ft, fs), (wt, ws) = res["full"], res["win"]
            rows[comp] = res
            err = res["full_err"]
            print(f"{comp:12s} {ft * 1000:8.1f} {fs / 1024:9.1f} {wt * 1000:8.1f} {ws / 1024:8.1f} "
                  f"{(1 - wt / ft) * 100:7.1f} {(1 - ws / fs) * 100:7.1f}  {err[0]:.3g} / {err[1]:.3g}"
                  + ("" if res["win_err"] == err else f"  win {res['win_err']}"))
    lossless = {c: r for c, r in rows.items() if r["full_err"] == (0.0, 0.0)}
    best_t = min(lossless, key=lambda c: lossless[c]["full"][0])
    best_s = min(lossless, key=lambda c: lossless[c]["full"][1])
    for label, c in (("fastest", best_t), ("smallest", best_s)):
        print(f"best lossless full frame ({label}): {c} {rows[c]['full'][0] * 1000:.1f} ms "
              f"{rows[c]['full'][1] / 1024:.1f} KiB")
    ref_t, ref_s = rows[best_t]["full"][0], rows[best_s]["full"][1]
    for c in ("zip", best_t, best_s):
        wt, ws = rows[c]["win"]
        print(f"window with {c}: time {wt * 1000:.1f} ms ({(1 - wt / ref_t) * 100:.0f} % below fastest lossless "
              f"full), size {ws / 1024:.1f} KiB ({(1 - ws / ref_s) * 100:.0f} % below smallest lossless full)")
    return 0


def cmd_readers(args: argparse.Namespace) -> int:
    """The engine's own readers on the windowed files against the full ones."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from engine.io.exr import read_exr

    for case in ("real", "edge", "empty"):
        full, win = (os.path.join(args.out, f"{case}_{k}.exr") for k in ("full", "win"))
        pf, nf, af = read_exr(full)
        pw, nw, aw = read_exr(win)
        same = pf.shape == pw.shape and np.array_equal(pf, pw)
        print(f"read_exr {case}: full {pf.shape} win {pw.shape} same={same} names_same={nf == nw} "
              f"attrs_same={af == aw}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("variants")
    v.add_argument("frame")
    v.add_argument("out")
    b = sub.add_parser("bench")
    b.add_argument("frame")
    b.add_argument("--runs", type=int, default=5)
    b.add_argument("--tmp", default=None)
    c = sub.add_parser("compare")
    c.add_argument("files", nargs="+")
    r = sub.add_parser("readers")
    r.add_argument("out")
    args = p.parse_args(argv)
    cmds = {"variants": cmd_variants, "bench": cmd_bench, "compare": cmd_compare, "readers": cmd_readers}
    return cmds[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
