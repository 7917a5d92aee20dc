"""Face Fusion for Blender: the add-on side. Thin: properties, operators, panels, node, handlers.

Talks to the out-of-process engine only through ``engine.client`` (see ``session``); never imports the
engine's heavy packages.
"""

from __future__ import annotations

from . import handlers, node, operators, panels, prefs, props

MODULES = (prefs, props, node, operators, panels, handlers)


def register() -> None:
    for module in MODULES:
        module.register()


def unregister() -> None:
    for module in reversed(MODULES):
        module.unregister()
