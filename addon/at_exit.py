"""Process exit: the add-on takes itself out of Blender while Python is still whole (issue 11, item 15).

Why: Blender's C side keeps strong references to the Python callables an add-on hands it (``bpy.app.timers``
above all: ours are persistent). In the ``bpy`` 4.2 module such a reference, reaching ``bpy`` through the
function's globals, keeps the ``bpy`` module alive through interpreter finalisation, so bpy's own teardown
(``WM_exit_ex``, run when that module is freed) never happens. The C++ static destructors of Blender's space types
then free registered Python classes after the interpreter is gone (``bpy_class_free`` -> ``PyGILState_Ensure`` ->
``PyThreadState_New(NULL)``), and every such process ends in SIGSEGV after its work is done: the exit code it
earned is lost (``python -c "import bpy; bpy.app.timers.register(lambda: 1.0)"`` alone shows it; with the timer
unregistered before exit it ends 0).

So the add-on is disabled from an ``atexit`` hook, the way Blender's own quit disables add-ons: our
``unregister()`` removes the timers, app handlers and classes and closes the engine session (joining its
threads). ``atexit`` runs last-in first-out and the hook is registered after ``bpy`` was imported, so it runs
before any exit work of ``bpy``'s own. When Blender has already disabled the add-on (a UI quit), it does nothing.

A batch render that fails must end from inside Blender's render (a ``render_pre`` handler): ``end_process`` is the
one place that does it. ``sys.exit`` there finalises Python with Blender's operator on the C stack, which bpy 4.2
never survives (SIGSEGV, whatever the status: a bare ``sys.exit(1)`` in any operator or handler shows it without
the add-on; 5.0 ends with 1), so on 4.2 the process ends with ``os._exit`` after flushing.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
from typing import NoReturn

import addon_utils  # Blender's own module
import bpy

# "bl_ext.user_default.face_fusion.addon" -> "bl_ext.user_default.face_fusion" (what addon_utils enabled);
# "addon" (run from a checkout) -> "": then the package registered itself and is unregistered directly.
_PACKAGE = __package__ or "addon"
_ROOT = _PACKAGE.rpartition(".")[0]
_ARMED = False  # registered and not yet unregistered
_HOOKED = False  # the atexit hook of this module object is in place (once per process and module load)


def arm() -> None:
    """From ``register()``: at exit, unregister the add-on if it is still registered then."""
    global _ARMED, _HOOKED
    _ARMED = True
    if not _HOOKED:
        atexit.register(_at_exit)
        _HOOKED = True


def disarm() -> None:
    """From ``unregister()``: nothing left to do at exit."""
    global _ARMED
    _ARMED = False


def _at_exit() -> None:
    if not _ARMED:
        return
    if _ROOT and addon_utils.check(_ROOT)[1]:
        # Through Blender's machinery so it knows the add-on is off (its own exit never unregisters it twice);
        # default_set=False: the user's list of enabled add-ons is left as it is.
        addon_utils.disable(_ROOT, default_set=False)
    if _ARMED:  # not managed by addon_utils (a checkout package registered directly), or its disable failed
        importlib.import_module(_PACKAGE).unregister()


def end_process(code: int) -> NoReturn:
    """End a batch Blender process with ``code`` from inside a Blender callback; the caller has closed the engine
    session first. Blender 5.0 survives ``SystemExit`` there; 4.2 gets ``os._exit`` (see above), after what its
    own teardown would have done that matters outside the process: output flushed, its session temp folder gone.
    Nothing else of the process is left to tear down: it was rendering, its files are written or not."""
    if bpy.app.version >= (5, 0, 0):
        sys.exit(code)
    tempdir = bpy.app.tempdir
    if tempdir and os.path.basename(os.path.normpath(tempdir)).startswith("blender_"):  # Blender's own folder only
        shutil.rmtree(tempdir, ignore_errors=True)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said
            pass
    os._exit(code)
