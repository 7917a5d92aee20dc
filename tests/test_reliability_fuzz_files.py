"""Issue 35: the standing fuzz suite, grown to the files the engine reads (analysis files, consent store, policy,
audit log, EXR attributes, model files), to settings with extreme floats on the CLI and the server, and to a client
that never reads. Seeded (replay with FF_FUZZ_SEED=<seed>); every case is counted as refused with a message, held
(accepted, or a tamper detected), or lost (a traceback, a wrong answer, a tamper not seen). Figures print with -s
and go into bench/RELIABILITY.md."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine import PROTOCOL_VERSION
from engine.errors import EngineError
from tests.reliability_support import PY, ROOT, RawEngine, ask, tiny_shot
from tests.test_reliability_backlog import flood

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX files and sockets")
FIGURES: dict[str, Any] = {}
SEED = int(os.environ.get("FF_FUZZ_SEED") or time.time_ns() % 1_000_000)
ODD = [None, True, -1, 0, 1 << 63, 1.5, 1e308, float("inf"), float("nan"), -0.0, 5e-324, "", "x" * 3000, "a\x00b",
       [], [1, [2]], {}, {"who": 3}, "1", [[[[[[]]]]]]]


@pytest.fixture(scope="module", autouse=True)
def report():
    print(f"\nfile fuzz seed {SEED} (replay: FF_FUZZ_SEED={SEED})")
    yield
    print("\nfile fuzz figures: " + json.dumps(FIGURES, sort_keys=True))


def tally(name: str, cases: list[Any], attempt: Callable[[Any], str]) -> dict[str, int]:
    """Run ``attempt`` on every case: it returns 'refused' or 'held'; anything it raises is 'lost'."""
    counts = {"tried": 0, "refused": 0, "held": 0, "lost": 0}
    lost = []
    for case in cases:
        counts["tried"] += 1
        try:
            counts[attempt(case)] += 1
        except Exception as exc:  # noqa: BLE001 (counting what got through is the point)
            counts["lost"] += 1
            lost.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    FIGURES[name] = counts
    assert counts["lost"] == 0, (SEED, name, lost[:3])
    return counts


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:
        return bytes(out[:rng.randrange(len(out))])
    if kind == 1:
        for _ in range(rng.randrange(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:
        at = rng.randrange(len(out))
        return bytes(out[:at] + os.urandom(rng.randrange(1, 64)) + out[at:])
    return os.urandom(rng.randrange(1, 400))


# ---- analysis files and cache entries -------------------------------------------------------------------------

def _analysis_bytes(rng: random.Random) -> bytes:
    from tests.test_reliability_validate import _good, _npz

    arrays, meta = _good()
    if rng.random() < 0.5:
        key, value = rng.choice(["t0_boxes", "t0_lm68", "t0_conf", "t0_mesh", "t0_emb"]), rng.choice(
            [np.ones((2, 3)), np.ones((2, 468, 3)), np.full((2,), np.nan), np.ones(2, np.int64), np.ones((0,)),
             np.ones((2, 68, 2), np.float16)])
        arrays[key] = value
    else:
        where = rng.choice([meta, meta["tracks"][0]])
        where[rng.choice(list(where))] = rng.choice(ODD)
    return _npz(arrays, json.dumps(meta, allow_nan=True))


def test_fuzzed_analysis_files_are_refused_or_read(tmp_path):
    from engine.analysis import checked
    from tests.test_reliability_validate import _good, _npz

    rng = random.Random(SEED)
    good = _npz(*_good())
    cases = [mutate(rng, good) for _ in range(150)] + [_analysis_bytes(rng) for _ in range(150)]

    def attempt(data: bytes) -> str:
        path = tmp_path / "a.npz"
        path.write_bytes(data)
        try:
            checked.read(str(path))
        except checked.AnalysisInvalid:
            return "refused"
        return "held"
    tally("analysis_files", cases, attempt)


# ---- consent store and policy -----------------------------------------------------------------------------------

def _json_doc(rng: random.Random, good: dict[str, Any]) -> str:
    doc = json.loads(json.dumps(good))
    key = rng.choice(list(doc))
    if isinstance(doc[key], dict) and rng.random() < 0.7:
        doc[key][rng.choice(["who", "when", "note", "revoked", "identity"])] = rng.choice(ODD)
    else:
        doc[key] = rng.choice(ODD)
    text = json.dumps(doc, allow_nan=True)
    return text if rng.random() < 0.8 else mutate(rng, text.encode()).decode("utf-8", "replace")


def test_fuzzed_consent_stores_and_policies_are_refused_or_read(tmp_path, monkeypatch):
    from engine import consent, policy

    rng = random.Random(SEED + 1)
    store = {"ab" * 32: {"identity": "ab" * 32, "who": "x", "when": "2026-01-01", "note": "n"},
             "cd" * 32: {"identity": "cd" * 32, "revoked": {"who": "y", "when": "2026-01-02"}}}
    path = tmp_path / "consent.json"
    monkeypatch.setenv(consent.ENV_FILE, str(path))

    def consent_attempt(text: str) -> str:
        path.write_text(text)
        try:
            consent.lookup("ab" * 32)
            consent.revocation("cd" * 32)
        except EngineError as exc:
            assert str(path) in str(exc)
            return "refused"
        return "held"
    tally("consent_store", [_json_doc(rng, store) for _ in range(200)], consent_attempt)

    pol = tmp_path / "policy.json"
    monkeypatch.setenv(policy.ENV_POLICY, str(pol))
    good = {"watermark": "locked_on", "blanket_consent": "forbidden", "signing_cert": "/c", "signing_key": "/k"}

    def policy_attempt(text: str) -> str:
        pol.write_text(text)
        try:
            data = policy.load()
        except EngineError as exc:
            assert str(pol) in str(exc)
            return "refused"
        assert set(data) <= set(policy.FIELDS)
        return "held"
    tally("policy", [_json_doc(rng, good) for _ in range(200)], policy_attempt)


# ---- the audit log ----------------------------------------------------------------------------------------------

def test_fuzzed_audit_logs_never_verify_with_changed_content(tmp_path, monkeypatch):
    from engine import audit, audit_key
    from engine.audit_chain import verify_log
    from tests.test_audit_chain import write_renders

    rng = random.Random(SEED + 2)
    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("FACE_FUSION_AUDIT_LOG", str(log))
    monkeypatch.setenv("FACE_FUSION_POLICY", str(tmp_path / "no-policy.json"))
    write_renders(log, 3)
    key = audit_key.read(log.with_name(log.name + ".key"))
    good = log.read_bytes().splitlines(keepends=True)
    content = [json.loads(x) for x in good]

    def tampered() -> list[bytes]:
        lines = list(good)
        i = rng.randrange(len(lines))
        kind = rng.randrange(5)
        if kind == 0:
            lines[i] = mutate(rng, lines[i]).replace(b"\n", b" ") + b"\n"
        elif kind == 1:
            del lines[i]
        elif kind == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:  # a field rewritten, the chain recomputed without the key (or stripped)
            prev = ""
            for k, raw in enumerate(lines):
                f = json.loads(raw)
                if k == i:
                    f[rng.choice(["user", "job", "time"])] = rng.choice(["mallory", "render", "2020"])
                if kind == 4:
                    f.pop("key", None)
                f["prev"] = prev
                f.pop("hash")
                f["hash"] = prev = audit.line_hash(f)
                lines[k] = (json.dumps(f, sort_keys=True) + "\n").encode()
        return lines

    def attempt(lines: list[bytes]) -> str:
        log.write_bytes(b"".join(lines))
        rep = verify_log(str(log), key)
        unvouched = rep.older and not rep.migrated_at
        if rep.problem or unvouched:
            return "refused"
        try:
            same = [json.loads(x) for x in lines] == content
        except ValueError:
            same = False
        assert same, f"a changed log verified: {rep}"
        return "held"
    tally("audit_log", [tampered() for _ in range(200)], attempt)


# ---- EXR attributes ---------------------------------------------------------------------------------------------

def test_fuzzed_exr_attributes_are_refused_or_read(tmp_path):
    from engine.export import inputs
    from engine.export.sign import manifest
    from engine.io.exr import write_exr

    rng = random.Random(SEED + 3)
    values = ['{"swapper": "geometric"}', "{bad", "[1,2]", "null", '"x"', "[" * 5000, '{"a": NaN}', "1e400", ""]
    cases = []
    for _ in range(150):
        attrs = {k: rng.choice(values + [json.dumps(rng.choice(ODD), allow_nan=True)])
                 for k in ("facefusion:settings", "facefusion:models", "facefusion:watermark", "facefusion:consent")}
        cases.append(attrs)

    def attempt(attrs: dict[str, str]) -> str:
        manifest(attrs, "x.png", [1, 1])  # never raises: what is not JSON is kept as text
        try:
            inputs.settings_of(attrs, "f.exr")
        except EngineError:
            return "refused"
        return "held"
    tally("exr_attributes", cases, attempt)

    def real(case: int) -> str:  # a few through real files: written, damaged, read back by the export's reader
        path = tmp_path / f"f{case}.exr"
        write_exr(str(path), np.zeros((4, 4, 4), np.float32), {}, interop_id="lin_rec709_scene",
                  attributes=cases[case])
        path.write_bytes(mutate(rng, path.read_bytes()) if case % 2 else path.read_bytes())
        try:
            inputs.settings_of(inputs.exr_attributes(str(path), need_rgba=True), str(path))
        except EngineError:
            return "refused"
        return "held"
    tally("exr_files", list(range(20)), real)


# ---- model files ------------------------------------------------------------------------------------------------

def test_fuzzed_model_files_are_refused_or_loaded(tmp_path):
    from engine.runtime.sessions import Runtime
    from tests.test_reliability_models import _onnx_bytes

    rng = random.Random(SEED + 4)
    good = _onnx_bytes()
    runtime = Runtime(providers_spec="cpu")

    def attempt(k_data: tuple[int, bytes]) -> str:
        path = tmp_path / f"m{k_data[0]}.onnx"
        path.write_bytes(k_data[1])
        try:
            runtime.session_for_path("toy", path)
        except EngineError as exc:
            assert str(path) in str(exc)
            return "refused"
        return "held"
    tally("model_files", list(enumerate(mutate(rng, good) for _ in range(60))), attempt)


# ---- settings with extreme floats: the CLI and the server -------------------------------------------------------

EXTREMES = ["1e400", "-1e400", "1e-400", "-0.0", "5e-324", "2.2250738585072014e-308", "1.7976931348623157e308",
            "Infinity", "NaN"]


def test_extreme_floats_on_the_cli(tmp_path):
    shot = tiny_shot(str(tmp_path), frames=1)

    def attempt(case: tuple[str, str]) -> str:
        path = tmp_path / "settings.json"
        path.write_text(f'{{"{case[0]}": {case[1]}}}')
        r = subprocess.run([PY, "-m", "engine", "swap", "--source", shot["source"], "--target",
                            str(tmp_path / "missing.####.png"), "--output", str(tmp_path / "out"), "--settings",
                            str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (case, r.returncode, r.stderr[-500:])
        return "refused" if str(path) in r.stderr else "held"  # held: settings fine, the missing plate refused
    tally("cli_extreme_floats", [(k, v) for k in ("key_interval", "colour_strength") for v in EXTREMES], attempt)


def test_extreme_floats_on_the_server_and_a_client_that_never_reads(tmp_path, monkeypatch):
    from engine import settings as schema

    shot = tiny_shot(str(tmp_path), frames=1)
    monkeypatch.setenv("FACE_FUSION_CLIENT_BACKLOG_BYTES", str(1 << 20))
    eng = RawEngine(str(tmp_path / "s"), "--allowed-output-root", str(tmp_path))
    try:
        ch = eng.channel()
        numeric = [f.name for f in schema.SCHEMA if f.kind in ("int", "float")]

        def attempt(case: tuple[str, str]) -> str:
            plate, source = json.dumps(str(tmp_path / "missing.####.png")), json.dumps(shot["source"])
            raw = (f'{{"v": {PROTOCOL_VERSION}, "id": 5, "op": "render", "plate": {{"path": {plate}}}, '
                   f'"sources": [{{"path": {source}}}], "settings": {{"{case[0]}": {case[1]}}}, '
                   f'"output_dir": {json.dumps(str(tmp_path / "out"))}, "frame_start": 1, "frame_end": 1}}')
            reply = ask(ch, raw.encode())
            if reply["ok"]:
                return "held"  # a finite value in range: the job is queued (and ends on the missing plate)
            assert "internal engine error" not in reply["error"], (case, reply)
            return "refused"
        tally("server_extreme_floats", [(k, v) for k in numeric for v in EXTREMES], attempt)

        def never_reads(k: int) -> str:
            c = eng.channel()
            sent = flood(c, 40_000)
            c.close()
            assert sent < 40_000, "the engine kept a client that read nothing"
            return "refused"
        tally("never_reading_clients", [0, 1], never_reads)
        assert ask(eng.channel(), {"v": PROTOCOL_VERSION, "id": 9, "op": "status"})["ok"]
    finally:
        assert eng.stop() == 0
