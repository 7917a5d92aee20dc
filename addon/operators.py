"""Every operator of the add-on, registered in one place; each group lives in a module of its own."""

from __future__ import annotations

from types import ModuleType

from . import (
    engine_setup,
    op_add,
    op_bake,
    op_cache,
    op_colour,
    op_consent,
    op_coverage,
    op_engine,
    op_faces,
    op_farm,
    op_models,
    op_sources,
)

GROUPS: tuple[ModuleType, ...] = (op_add, op_bake, op_cache, op_colour, op_coverage, op_sources, op_faces, op_engine,
                                  engine_setup, op_farm, op_models, op_consent)


def register() -> None:
    for group in GROUPS:
        group.register()


def unregister() -> None:
    for group in reversed(GROUPS):
        group.unregister()
