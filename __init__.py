"""Face Fusion extension root: Blender loads this package; everything lives in ``addon``."""

from .addon import register, unregister  # noqa: F401
