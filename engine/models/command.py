"""``python -m engine models list | fetch ID... | verify [ID...] | import DIR``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.models import catalogue, fetch, verify
from engine.models.catalogue import CatalogueError, ModelEntry


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine models",
                                description="The model catalogue: list, download, verify and import models.")
    p.add_argument("--models-dir", help=f"models folder (default: ${catalogue.ENV_MODELS_DIR}, else "
                                        f"{catalogue.default_models_dir()})")
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="every model, its licence and whether it is installed")
    ls.add_argument("--stage", choices=catalogue.STAGES)
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    f = sub.add_parser("fetch", help="download models (resumable, hash-checked); with their dependencies")
    f.add_argument("ids", nargs="+", metavar="ID")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    v = sub.add_parser("verify", help="re-hash installed models; a file that fails is removed")
    v.add_argument("ids", nargs="*", metavar="ID")
    v.add_argument("--keep", action="store_true", help="report a bad file but do not remove it")
    i = sub.add_parser("import", help="copy models from a folder (offline machines, studio mirrors)")
    i.add_argument("folder")
    i.add_argument("ids", nargs="*", metavar="ID", help="only these (default: every catalogue file found)")
    for sp in (f, v, i):
        sp.add_argument("--models-dir", dest="models_dir_sub", help="models folder (same as before the command)")
    ls.add_argument("--models-dir", dest="models_dir_sub", help="models folder (same as before the command)")
    return p


def _status(entry: ModelEntry, folder: Path) -> str:
    path = fetch.installed_path(entry, folder)
    if not path.is_file():
        return "missing"
    return "installed" if verify.verified_unchanged(folder, entry, path) else "unverified"


def _with_requirements(ids: list[str], entries: dict[str, ModelEntry]) -> list[ModelEntry]:
    out: list[str] = []

    def visit(mid: str) -> None:
        if mid in out:
            return
        if mid not in entries:
            raise CatalogueError(f"unknown model {mid!r}; `python -m engine models list` shows the catalogue")
        for r in entries[mid].requires:
            visit(r)
        out.append(mid)

    for mid in ids:
        visit(mid)
    return [entries[m] for m in out]


def _cmd_list(args, entries: dict[str, ModelEntry], folder: Path) -> int:
    rows = [e for e in entries.values() if not args.stage or e.stage == args.stage]
    if args.json:
        print(json.dumps([{"id": e.id, "stage": e.stage, "backend": e.backend, "file": e.file, "size": e.size,
                           "licence": e.licence.name, "commercial": e.licence.commercial,
                           "embedded": e.embedded, "status": _status(e, folder),
                           "trust": verify.trust(folder, e) if _status(e, folder) != "missing" else "",
                           "sources": [s.describe() for s in e.sources]} for e in rows], indent=1))
        return 0
    print(f"models folder: {folder}")
    print(f"{'id':<34} {'stage':<10} {'size':>9}  {'status':<10} licence")
    for e in rows:
        size = f"{e.size / 1e6:.1f} MB" if e.size_exact else f"~{e.size / 1e6:.0f} MB"
        flag = "  NON-COMMERCIAL" if e.non_commercial else ""
        status = _status(e, folder)
        tofu = "  TRUSTED ON FIRST USE (no published sha256)" if status != "missing" and "first use" in \
            verify.trust(folder, e) else ""
        print(f"{e.id:<34} {e.stage:<10} {size:>9}  {status:<10} {e.licence.name}{flag}{tofu}")
    if any(e.non_commercial for e in rows):
        print("\nModels marked NON-COMMERCIAL may not be used for commercial work; check each licence.")
    return 0


def _cmd_fetch(args, entries: dict[str, ModelEntry], folder: Path) -> int:
    todo = _with_requirements(args.ids, entries)
    failed = 0
    for e in todo:
        if e.non_commercial:
            print(f"note: {e.id} is licensed '{e.licence.name}': NOT for commercial use", file=sys.stderr)
        try:
            res = fetch.fetch(e, folder, show_progress=not args.quiet)
            print(f"{e.id}: {res.action} {res.path}")
        except (fetch.FetchError, verify.HashMismatch, ValueError) as exc:
            failed += 1
            print(f"error: {exc}", file=sys.stderr)
    return 1 if failed else 0


def _cmd_verify(args, entries: dict[str, ModelEntry], folder: Path) -> int:
    chosen = _with_requirements(args.ids, entries) if args.ids else list(entries.values())
    bad = 0
    for e in chosen:
        path = fetch.installed_path(e, folder)
        if not path.is_file():
            if args.ids:
                print(f"{e.id}: missing ({path})")
                bad += 1
            continue
        try:
            verify.verify_installed(e, path, folder, full=True)
            print(f"{e.id}: ok {path}")
        except verify.HashMismatch as exc:
            bad += 1
            removable = e.package_source is None and path.parent == folder
            if removable and not args.keep:
                path.unlink(missing_ok=True)
                verify.forget(folder, e.id)
                print(f"{e.id}: BAD, removed: {exc}", file=sys.stderr)
            else:
                print(f"{e.id}: BAD: {exc}", file=sys.stderr)
    return 1 if bad else 0


def _cmd_import(args, entries: dict[str, ModelEntry], folder: Path) -> int:
    src = Path(args.folder).expanduser()
    if not src.is_dir():
        print(f"error: {src} is not a folder", file=sys.stderr)
        return 2
    chosen = _with_requirements(args.ids, entries) if args.ids else list(entries.values())
    rep = fetch.import_dir(src, chosen, folder)
    for mid in rep.imported:
        print(f"{mid}: imported")
    for mid in rep.present:
        print(f"{mid}: already installed")
    for name, why in rep.refused:
        print(f"refused {name}: {why}", file=sys.stderr)
    if not (rep.imported or rep.present or rep.refused):
        print(f"no catalogue model file found in {src}", file=sys.stderr)
        return 1
    return 1 if rep.refused else 0


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        entries = catalogue.load()
    except (OSError, CatalogueError, ValueError) as exc:
        print(f"error: cannot read the model catalogue: {exc}", file=sys.stderr)
        return 2
    folder = catalogue.models_dir(getattr(args, "models_dir_sub", None) or args.models_dir)
    cmds = {"list": _cmd_list, "fetch": _cmd_fetch, "verify": _cmd_verify, "import": _cmd_import}
    try:
        return cmds[args.cmd](args, entries, folder)
    except CatalogueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
