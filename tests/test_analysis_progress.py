"""The shot analysis's progress events: frames of the shot per named pass, a count that never goes backwards."""

from __future__ import annotations

import io

from engine import progress


def test_events_count_frames_of_the_shot_per_pass_and_never_go_back():
    frames = 7
    events = [progress.analysis_progress(p, d, frames) for p in (1, 2, 3) for d in range(1, frames + 1)]
    assert [e["done"] for e in events] == list(range(1, 3 * frames + 1))
    assert {e["total"] for e in events} == {3 * frames}
    assert [e["pass_name"] for e in events[::frames]] == list(progress.ANALYSIS_PASSES)
    assert events[frames] == {"type": "progress", "stage": "analyse", "done": frames + 1, "total": 3 * frames,
                              "pass": 2, "passes": 3, "pass_name": "finding faces", "pass_done": 1,
                              "frames": frames}


def test_the_terminal_bar_shows_the_pass_and_frames_of_the_shot():
    out = io.StringIO()
    printer = progress.ProgressPrinter(stream=out, width=10)
    printer(progress.analysis_progress(2, 5, 10))
    printer({"type": "progress", "stage": "render", "done": 3, "total": 4})
    text = out.getvalue()
    assert "analysing: finding faces (2/3) [#####-----] 5/10" in text and "rendering [#######---] 3/4" in text
