"""What a running bake shows: one fraction that never goes backwards, and a line in frames of the shot.

A target's work is the engine's shot analysis (when it runs one: a fresh plate) and then the frames it makes. The
analysis counts as many frames as the shot has, so a 5-frame bake of a 275-frame plate spends most of its bar on
the analysis, where most of its time goes. The analysis's events come before the target's first frame, so adding
its share when the first one arrives never lowers the fraction.
"""

from __future__ import annotations

from typing import Any


def target_fraction(item: Any) -> float:
    """0..1 of one target's work (``item``: a bake.TargetBake)."""
    made, wanted = len(item.done), len(item.frames)
    ev = item.analysis
    shot = int(ev.get("frames", 0)) if ev else 0
    analysed = shot * min(1.0, int(ev.get("done", 0)) / max(int(ev.get("total", 1)), 1)) if shot else 0.0
    whole = shot + wanted
    return 1.0 if whole == 0 else (analysed + min(made, wanted)) / whole


def run_fraction(items: list[Any]) -> float:
    """0..1 of the whole run: each target weighted by the frames it makes (every target counts at least one)."""
    if not items:
        return 1.0
    weights = [max(len(i.frames), 1) for i in items]
    return sum(w * target_fraction(i) for w, i in zip(weights, items, strict=True)) / sum(weights)


def analysing_line(item: Any) -> str:
    """'analysing the shot: finding faces, frame 120 of 275 (pass 2 of 3)' while the engine's analysis of the
    item's plate runs; '' before it starts and once it is over."""
    ev = item.analysis
    if not ev or int(ev.get("done", 0)) >= int(ev.get("total", 0)):
        return ""
    if "frames" not in ev:  # an engine from before frames of the shot were reported: its count of reads
        return f"analysing the shot, {100 * int(ev['done']) // max(int(ev['total']), 1)}%"
    line = f"analysing the shot: {ev['pass_name']}, frame {ev['pass_done']} of {ev['frames']}"
    return line + (f" (pass {ev['pass']} of {ev['passes']})" if int(ev.get("passes", 1)) > 1 else "")


def status_line(items: list[Any]) -> str:
    """The bake's progress line: the running analysis in frames of the shot, else the frames made of the run's."""
    current = next((i for i in items if not i.finished), None)
    if current is not None and not current.done:
        line = analysing_line(current)
        if line:
            return f"Face Fusion {current.target.label}: {line}" if len(items) > 1 else f"Face Fusion: {line}"
    made = sum(len(i.done) for i in items)
    return f"Face Fusion: {made}/{sum(len(i.frames) for i in items)} frames"
