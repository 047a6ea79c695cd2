"""The sweep's progress where a bar cannot show: plain lines to a file or a pipe.

With 40 replays, a line is due every 2 replays (5%) or once 60 s have passed since the
last line; the clock is a list the test moves by hand, so every line is checked exactly.
"""

from __future__ import annotations

import io

from rich.console import Console
from sia.pipelines.executors import ProgressBar, _clock_span


def lines_of(console_file: io.StringIO) -> list[str]:
    return [ln for ln in console_file.getvalue().splitlines() if ln]


def make(total: int, now: list[float], interval_s: float = 60.0):
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=40)  # lines are never wrapped
    bar = ProgressBar(True, total, "replays on 1 process", console=console, interval_s=interval_s,
                      clock=lambda: now[0])
    return bar, out


def test_a_line_every_twentieth_and_the_last():
    now = [100.0]
    bar, out = make(40, now)
    with bar as advance:
        for i in range(40):
            now[0] += 3.0  # 3 s per replay
            advance(f"exp-{i:03d}/sia", 3.0)
    got = lines_of(out)
    assert got[0] == "replays on 1 process: 40 to run"
    assert len(got) == 1 + 20  # every 2nd replay, the 40th included
    # after 2 replays: 6 s spent, 3 s each, 38 left -> 114 s
    assert got[1] == ("replays: 2/40 (5%), 0:00:06 elapsed, about 0:01:54 left; "
                      "last exp-001/sia (3.0 s)")
    assert got[-1] == ("replays: 40/40 (100%), 0:02:00 elapsed, about 0:00:00 left; "
                       "last exp-039/sia (3.0 s)")


def test_a_slow_replay_is_said_when_the_interval_has_passed():
    now = [0.0]
    bar, out = make(1000, now)  # a line every 50 replays
    with bar as advance:
        now[0] = 10.0
        advance("a", 10.0)  # 1 of 50, 10 s: not yet
        now[0] = 75.0
        advance("b", 65.0)  # 75 s since the last line: said
        now[0] = 100.0
        advance("c", 25.0)  # 25 s since: not yet
    got = lines_of(out)
    assert len(got) == 2
    assert got[1].startswith("replays: 2/1,000 (0%), 0:01:15 elapsed, about 10:23:45 left")


def test_a_terminal_gets_the_bar_and_disabled_gets_nothing():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with ProgressBar(True, 3, "x", console=console) as advance:
        for _ in range(3):
            advance("r", 1.0)
    assert "replays:" not in out.getvalue()  # the bar, not the lines
    with ProgressBar(False, 3, "x", console=Console(file=out, force_terminal=False)) as advance:
        advance("r", 1.0)
    with ProgressBar(True, 0, "x", console=Console(file=out, force_terminal=False)) as advance:
        pass
    assert "replays:" not in out.getvalue()


def test_clock_span():
    assert _clock_span(0) == "0:00:00"
    assert _clock_span(59.6) == "0:01:00"
    assert _clock_span(3725) == "1:02:05"
    assert _clock_span(-4) == "0:00:00"
