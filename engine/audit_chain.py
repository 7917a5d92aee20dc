"""``python -m engine audit verify [LOG] [--frames DIR]``: check the audit log's hash chain and, with --frames,
that every EXR's audit line is in it. Names the first line that was edited, removed, reordered or is missing."""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from dataclasses import dataclass, field

from engine.audit import audit_path, line_hash, link_of


@dataclass
class Report:
    lines: int = 0
    legacy: int = 0  # lines without hashes before the chain began
    problem: str | None = None
    hashes: dict[str, int] = field(default_factory=dict)  # line hash -> line number


def verify_log(path: str) -> Report:
    rep = Report()
    prev_raw: bytes | None = None
    open_starts: dict[str, int] = {}
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            rep.lines = n
            try:
                fields = json.loads(raw)
            except ValueError:
                fields = None
            if not isinstance(fields, dict):
                rep.problem = f"line {n}: not a JSON object (edited or damaged)"
                return rep
            if "hash" not in fields:
                if rep.hashes:
                    rep.problem = f"line {n}: has no hash after the chain began (added or edited by hand)"
                    return rep
                rep.legacy += 1
                prev_raw = raw
                continue
            want_prev = link_of(prev_raw) if prev_raw is not None else ""
            if line_hash(fields) != fields["hash"]:
                rep.problem = f"line {n}: its content does not match its hash (edited)"
                return rep
            if fields.get("prev") != want_prev:
                where = rep.hashes.get(fields.get("prev", ""))
                rep.problem = (f"line {n}: follows line {where}, not line {n - 1} (lines reordered)" if where else
                               f"line {n}: does not follow line {n - 1} (a line removed, reordered or rewritten)")
                return rep
            rep.hashes[fields["hash"]] = n
            if fields.get("job") == "render-start":
                open_starts[fields["hash"]] = n
            elif fields.get("start") in open_starts:
                open_starts.pop(fields["start"])
            prev_raw = raw
    if open_starts:
        first = min(open_starts.values())
        rep.problem = (f"line {rep.lines + 1}: missing: the render started at line {first} has no closing line "
                       "(the log was cut short, or that engine died mid-render)")
    return rep


def verify_frames(rep: Report, frames_dir: str) -> str | None:
    from engine.io.exr import read_exr

    for path in sorted(glob.glob(os.path.join(frames_dir, "*.exr"))):
        attrs = read_exr(path)[2]
        h = attrs.get("facefusion:audit_line", "")
        if h and h not in rep.hashes:
            return (f"line {rep.lines + 1}: missing: {os.path.basename(path)} was rendered under audit line "
                    f"{h[:12]}, which the log does not hold (cut short or rewritten from scratch)")
    return None


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine audit", description="check the tamper-evident audit log")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="check the hash chain (and the frames' audit lines)")
    v.add_argument("log", nargs="?", help="the audit log [$FACE_FUSION_AUDIT_LOG or the per-user one]")
    v.add_argument("--frames", metavar="DIR", help="a folder of EXRs whose audit lines must be in the log")
    args = p.parse_args(argv)
    path = args.log or str(audit_path() or "")
    if not path or not os.path.isfile(path):
        print(f"error: no audit log at '{path}'", file=sys.stderr)
        return 2
    rep = verify_log(path)
    if rep.problem is None and args.frames:
        rep.problem = verify_frames(rep, args.frames)
    legacy = f", {rep.legacy} legacy line(s) without hashes before it" if rep.legacy else ""
    if rep.problem:
        print(f"FAILED {path}: {rep.problem}")
        return 1
    print(f"ok {path}: {len(rep.hashes)} chained line(s){legacy}")
    return 0
