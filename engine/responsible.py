"""Command line of the responsible-use features (issue 14): ``watermark``, ``audit``, ``consent``, ``export``
and ``provenance``, and the ``swap --consent`` option. cli.py delegates here in a few lines."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from engine.errors import EngineError

COMMANDS = ("watermark", "audit", "consent", "export", "provenance")


HELP = {"watermark": "read the invisible watermark from EXRs, images and movies (see: watermark detect --help)",
        "audit": "check the tamper-evident audit log (see: audit verify --help)",
        "consent": "confirm, revoke or list consent per source identity (see: consent --help)",
        "export": "EXRs -> PNG/JPEG/TIFF/MP4 with a signed C2PA manifest (see: export --help)",
        "provenance": "what a frame says about itself: EXR attributes, C2PA manifest, watermark"}


def add_parsers(sub: Any) -> None:
    """The commands in ``python -m engine --help`` (each parses its own arguments)."""
    for name in COMMANDS:
        sub.add_parser(name, help=HELP[name], add_help=False)


def add_swap_options(sw: argparse.ArgumentParser) -> None:
    sw.add_argument("--consent", metavar="NOTE", default=None,
                    help="confirm that you have the right to use this likeness for this work, with a note (whose "
                         "face, which release, which work); stored for the source identity before rendering")
    sw.add_argument("--consent-file", metavar="FILE", default=None,
                    help="the consent store to check (and record into): the one saved with the shot, for farm "
                         "workers [$FACE_FUSION_CONSENT_FILE or the per-user one]")


def before_swap(args: argparse.Namespace, job: Any) -> None:
    """swap --consent: store the confirmation first (the render then finds it)."""
    from engine import consent

    if getattr(args, "consent_file", None):
        if not os.path.isfile(args.consent_file) and not args.consent:
            raise EngineError(f"no consent store at '{args.consent_file}'",
                              "give the consent file saved with the shot, or confirm with --consent 'NOTE'")
        os.environ[consent.ENV_FILE] = os.path.abspath(args.consent_file)
    if getattr(args, "consent", None):
        entry = consent.grant(consent.identity_digest(job.sources), args.consent)
        print(f"consent recorded for source identity {entry['identity'][:12]} by {entry['who']}: {entry['note']}")


def main(argv: list[str]) -> int:
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "watermark":
            from engine.watermark.detect import main as wm_main

            return wm_main(rest)
        if cmd == "audit":
            from engine.audit_chain import main as audit_main

            return audit_main(rest)
        if cmd == "consent":
            return _consent(rest)
        if cmd == "export":
            from engine.export.command import export_main

            return export_main(rest)
        from engine.export.command import provenance_main

        return provenance_main(rest)
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _consent(argv: list[str]) -> int:
    from engine import consent
    from engine.job import ImageInput

    p = argparse.ArgumentParser(prog="python -m engine consent",
                                description="confirm, revoke or list consent per source identity (stored by hash)")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grant", help="confirm the right to use a likeness")
    g.add_argument("--source", action="append", required=True, metavar="PHOTO", help="the photos, as for swap")
    g.add_argument("--note", required=True, help="whose face, which release, which work")
    g.add_argument("--who", default=None, help="who confirms [the current user]")
    r = sub.add_parser("revoke", help="withdraw a confirmation: renders of the identity stop")
    r.add_argument("--source", action="append", metavar="PHOTO")
    r.add_argument("--identity", help="the source-identity hash instead of the photos")
    sub.add_parser("list", help="every stored confirmation")
    args = p.parse_args(argv)
    if args.cmd == "list":
        for entry in consent._read(consent.store_path()).values():
            state = f"revoked {entry['revoked']['when']}" if "revoked" in entry else "valid"
            print(json.dumps({**entry, "state": state}, sort_keys=True))
        return 0
    if args.cmd == "grant":
        entry = consent.grant(consent.identity_digest([ImageInput(path=s) for s in args.source]), args.note, args.who)
        print(f"consent recorded for source identity {entry['identity']} by {entry['who']} at {entry['when']}")
        return 0
    if not (args.identity or args.source):
        p.error("revoke needs --source PHOTO... or --identity HASH")
    ident = args.identity or consent.identity_digest([ImageInput(path=s) for s in args.source])
    entry = consent.revoke(ident)
    if entry is None:
        print(f"error: no consent is stored for source identity {ident[:12]}", file=sys.stderr)
        return 2
    print(f"consent for source identity {ident[:12]} revoked at {entry['revoked']['when']}")
    return 0
