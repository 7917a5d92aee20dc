"""``python -m engine audit verify [LOG] [--frames DIR] [--key FILE] [--allow-legacy]``: check the audit log's keyed
hash chain and, with --frames, that every EXR's audit line is in it. Names the first line that was edited, removed,
reordered or is missing; lines of older engines (no hash, or an unkeyed chain) pass only behind a keyed migration
line, or with --allow-legacy."""

from __future__ import annotations

import argparse
import glob
import hashlib
import hmac
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from engine import audit_key
from engine.audit import MIGRATION, audit_path, line_hash, link_of
from engine.errors import EngineError
from engine.io import bounded_json


@dataclass
class Report:
    lines: int = 0
    legacy: int = 0  # lines without hashes (older engines)
    unkeyed: int = 0  # lines of an older engine's unkeyed chain (anyone can recompute those)
    migrated_at: int = 0  # the keyed migration line that vouches for the older lines before it
    problem: str | None = None
    hashes: dict[str, int] = field(default_factory=dict)  # line hash -> line number

    @property
    def older(self) -> int:
        return self.legacy + self.unkeyed


def verify_log(path: str, key: bytes | None) -> Report:
    """Check every line; ``key`` None: the key is unavailable (keyed lines then cannot be checked: a problem)."""
    rep = Report()
    prev_raw: bytes | None = None
    prefix = hashlib.sha256()
    open_starts: dict[str, int] = {}
    kid = audit_key.key_id(key) if key else None
    keyed = False
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            rep.lines = n
            try:
                fields = bounded_json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                fields = None
            if not isinstance(fields, dict):
                rep.problem = f"line {n}: not a JSON object (edited or damaged)"
                return rep
            want_prev = link_of(prev_raw) if prev_raw is not None else ""
            if "hash" not in fields or "key" not in fields:
                if keyed:
                    rep.problem = (f"line {n}: has no hash after the chain began (added or edited by hand)"
                                   if "hash" not in fields else
                                   f"line {n}: has no key id after the keyed chain began (added by hand, or its key "
                                   "id stripped)")
                    return rep
                if "hash" in fields:  # an older engine's unkeyed chain: checked as it was
                    if line_hash(fields) != fields["hash"] or fields.get("prev") != want_prev:
                        rep.problem = f"line {n}: its unkeyed hash does not match (edited)"
                        return rep
                    rep.hashes[fields["hash"]] = n
                    rep.unkeyed += 1
                else:
                    rep.legacy += 1
                prefix.update(raw)
                prev_raw = raw
                continue
            if kid is None:
                rep.problem = f"line {n}: is keyed, and the audit key is not available to check it"
                return rep
            if fields["key"] != kid:
                rep.problem = (f"line {n}: was written with audit key {str(fields['key'])[:16]}, not this log's key "
                               f"{kid} (a line from another installation, or forged)")
                return rep
            if not hmac.compare_digest(audit_key.mac(key, fields), str(fields["hash"])):  # type: ignore[arg-type]
                rep.problem = f"line {n}: its content does not match its hash (edited, or rewritten without the key)"
                return rep
            if fields.get("prev") != want_prev:
                where = rep.hashes.get(fields.get("prev", ""))
                rep.problem = (f"line {n}: follows line {where}, not line {n - 1} (lines reordered)" if where else
                               f"line {n}: does not follow line {n - 1} (a line removed, reordered or rewritten)")
                return rep
            if not keyed and rep.older:
                if fields.get("job") != MIGRATION or fields.get("lines") != rep.older \
                        or fields.get("prefix_sha256") != prefix.hexdigest():
                    rep.problem = (f"line {n}: the keyed chain begins without a migration line that vouches for the "
                                   f"{rep.older} older line(s) before it as they are now (they were edited)")
                    return rep
                rep.migrated_at = n
            keyed = True
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
    v = sub.add_parser("verify", help="check the keyed hash chain (and the frames' audit lines)")
    v.add_argument("log", nargs="?", help="the audit log [$FACE_FUSION_AUDIT_LOG or the per-user one]")
    v.add_argument("--frames", metavar="DIR", help="a folder of EXRs whose audit lines must be in the log")
    v.add_argument("--key", metavar="FILE", help="the audit key [the studio policy's audit_key, else LOG.key]")
    v.add_argument("--allow-legacy", action="store_true",
                   help="accept lines without hashes or an unkeyed chain that no migration line vouches for "
                        "(older engines' logs; anyone could have written or rewritten those)")
    args = p.parse_args(argv)
    path = args.log or str(audit_path() or "")
    if not path or not os.path.isfile(path):
        print(f"error: no audit log at '{path}'", file=sys.stderr)
        return 2
    key_file = Path(args.key) if args.key else audit_key.key_path(Path(path))[0]
    try:
        key: bytes | None = audit_key.read(key_file)
    except FileNotFoundError:
        key = None
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rep = verify_log(path, key)
    if rep.problem is None and args.frames:
        rep.problem = verify_frames(rep, args.frames)
    keyed = len(rep.hashes) - rep.unkeyed
    if rep.problem is None and rep.older and not rep.migrated_at and not args.allow_legacy:
        kinds = " and ".join(x for x in (f"{rep.legacy} line(s) without hashes" if rep.legacy else "",
                                         f"{rep.unkeyed} unkeyed line(s)" if rep.unkeyed else "") if x)
        rep.problem = (f"{kinds} that no keyed migration line vouches for: anyone who can edit the log could have "
                       "written them (rerun with --allow-legacy to accept an older engine's log)")
    if rep.problem:
        print(f"FAILED {path}: {rep.problem}")
        return 1
    older = (f", {rep.older} older line(s) before the migration at line {rep.migrated_at}" if rep.migrated_at else
             f", {rep.older} older line(s) accepted with --allow-legacy ({rep.legacy} legacy line(s) without hashes,"
             f" {rep.unkeyed} unkeyed)" if rep.older else "")
    print(f"ok {path}: {keyed} chained line(s) keyed with {key_file}{older}")
    return 0
