"""Deliverables from our EXRs (issue 14): 8-bit sRGB PNG/JPEG/TIFF frames or an H.264 MP4 (frames.py), signed with
a C2PA manifest (sign.py), and the ``export`` / ``provenance`` commands (command.py)."""
