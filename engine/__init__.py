"""Face Fusion engine: detects, aligns, swaps, colour-matches and super-resolves faces, writes EXRs.

Runs in its own Python environment; never imports bpy.
"""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
