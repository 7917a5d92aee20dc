"""Invisible watermark (issue 14): payload (payload.py), the mark (mark.py), embedding into the face layer
(embed.py), reading it back (read.py) and the ``watermark detect`` command (detect.py)."""
