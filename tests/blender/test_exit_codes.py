"""Issue 11 item 15: a Blender (bpy) process with the add-on enabled ends with the exit code its work earned.

In the bpy 4.2 module a Python callable still registered with Blender at exit (our persistent timers) kept ``bpy``
alive through finalisation, and the process died with SIGSEGV (-11) after its work was done (addon/at_exit.py).
Each case starts a fresh bpy process the way the suite's batch tests do and asserts its exact exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ADDON
from test_batch import ENABLE

bpy = pytest.importorskip("bpy")

# Enables the installed extension as test_batch's farm script does, checks that the add-on's timer is registered
# (a condition of the crash), optionally starts the engine (client reader threads and the engine subprocess alive
# at exit), then ends as argv[1] says.
SCRIPT = ENABLE + """
addon = sys.modules["%(addon)s.addon"]
assert bpy.app.timers.is_registered(addon.handlers._drain), "the add-on's timer is not registered"
if sys.argv[2] == "engine":
    print("ENGINE", addon.session.get().info()["engine_version"], flush=True)
print("ENABLED", flush=True)
if sys.argv[1] == "raise":
    raise RuntimeError("the script failed on purpose")
if sys.argv[1] == "handler":  # the batch failure's way out: from inside Blender (a handler), output not flushed yet
    print("TEMPDIR", bpy.app.tempdir, flush=True)
    print("UNFLUSHED")
    bpy.app.handlers.load_post.append(bpy.app.handlers.persistent(lambda *_: addon.at_exit.end_process(5)))
    bpy.ops.wm.read_homefile()
    print("NOT REACHED")
sys.exit(int(sys.argv[1]))
"""


def _run(end: str, engine: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)  # same user folder: the extension is installed and enabled there
    try:
        return subprocess.run([sys.executable, "-c", SCRIPT % {"addon": ADDON}, end, "engine" if engine else "-"],
                              capture_output=True, text=True, timeout=300, env=env)
    finally:
        bpy.ops.wm.save_userpref()  # the child's enable may have rewritten the shared preferences


@pytest.mark.parametrize(("end", "engine", "code"), [
    ("0", False, 0),  # success: 0, not -11
    ("0", True, 0),  # success with a live engine session
    ("3", False, 3),  # a script's own exit status survives
    ("raise", False, 1),  # an uncaught error: Python's clean 1
    ("handler", False, 5),  # ended from inside a Blender callback (a failing batch render's handler)
])
def test_a_bpy_process_with_the_addon_enabled_ends_with_its_own_exit_code(installed, end, engine, code):
    proc = _run(end, engine)
    assert "ENABLED" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    if end == "raise":
        assert "the script failed on purpose" in proc.stderr
    if end == "handler":
        assert "UNFLUSHED" in proc.stdout and "NOT REACHED" not in proc.stdout, proc.stdout[-2000:]
        tempdir = proc.stdout.split("TEMPDIR", 1)[1].split()[0]
        assert not os.path.exists(tempdir), f"Blender's session folder {tempdir} left behind"
    assert "Traceback" not in proc.stderr or end == "raise", proc.stderr[-3000:]  # the exit hook ran cleanly
