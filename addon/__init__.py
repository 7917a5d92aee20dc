"""Face Fusion for Blender: the add-on side. Thin: properties, operators, panels, node, handlers.

Talks to the out-of-process engine only through ``engine.client`` (see ``session``); never imports the
engine's heavy packages. Modules in layers, each importing only those below it (tests/test_addon_imports.py):

- leaves: engine_link, compat, plates, ocio, prefs, images, exr_header, cache_move (and rgba_copy, a script run by
  the engine's Python)
- schema, sources, session, coverage
- targets (the ``Target`` base), strip_target and node_target (its two kinds)
- lookup (finding targets), retarget (pointing them at their cache folder)
- props, node, sequencer, bake
- op_common, op_add, op_bake, op_coverage, op_sources, op_faces, op_engine, engine_setup; operators, panels,
  handlers, file_handlers, on_demand
"""

from __future__ import annotations

from . import file_handlers, handlers, node, on_demand, operators, panels, prefs, props

MODULES = (prefs, props, node, operators, panels, handlers, file_handlers, on_demand)


def register() -> None:
    for module in MODULES:
        module.register()


def unregister() -> None:
    for module in reversed(MODULES):
        module.unregister()
