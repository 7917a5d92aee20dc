"""Face Fusion extension root: Blender loads this package; everything lives in ``addon``."""

try:
    import bpy  # noqa: F401
except ModuleNotFoundError:  # imported outside Blender (pytest walks the repository root): nothing to register
    pass
else:
    from .addon import register, unregister  # noqa: F401
