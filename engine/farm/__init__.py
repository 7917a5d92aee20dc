"""Render farms: one shot analysis per shot written next to the output, render chunks that only read it, and the
job definitions for Open Job Description (``packaging/openjd``) and Flamenco (``packaging/flamenco``).

``shot_file`` writes and checks the analysis file, ``chunk`` runs a render chunk from it (``swap --analysis``),
``command`` holds ``python -m engine analyse`` and ``python -m engine farm ...``.
"""
