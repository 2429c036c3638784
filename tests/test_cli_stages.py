"""Progress off a terminal (``pos_geometry/cli/_stages.py``): a line when each stage starts and ends, one while it
runs at the heartbeat, stage numbers 1..n over a fixed n; nothing with ``--quiet``."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from pos_geometry import _progress
from pos_geometry.cli._stages import StageLog


def _log() -> tuple[io.StringIO, Console]:
    buffer = io.StringIO()
    return buffer, Console(file=buffer, force_terminal=False, width=200)


def test_a_line_at_each_start_and_end_and_while_a_stage_runs():
    buffer, log = _log()
    beat = threading.Event()
    with StageLog("card", 3, heartbeat_s=0.01, log=log) as stages:
        stages.started(1, "Identity\x1b[2J")
        stages.done(1, "Identity\x1b[2J")
        stages.started(2, "The table")
        original = stages._print

        def printed(text: str) -> None:
            original(text)
            if "still running" in text:
                beat.set()

        stages._print = printed
        assert beat.wait(60)  # the heartbeat thread printed at least once (bounded by a count, not a budget)
        stages.done(2, "The table")
        stages.started(3, "Causal")
        stages.done(3, "Causal")
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "card [1/3] Identity\\x1b[2J: started" and "\x1b" not in buffer.getvalue()
    assert lines[1].startswith("card [1/3] Identity\\x1b[2J: done in ")
    assert any(line.startswith("card [2/3] The table: still running (") for line in lines)
    assert [line for line in lines if line.endswith(": started")] == [
        "card [1/3] Identity\\x1b[2J: started",
        "card [2/3] The table: started",
        "card [3/3] Causal: started",
    ]
    assert lines[-1].startswith("card [3/3] Causal: done in ") and lines[-1].endswith(" s in all)")


def test_quiet_prints_nothing(monkeypatch):
    buffer, log = _log()
    monkeypatch.setitem(_progress._settings, "quiet", True)
    with StageLog("card", 2, heartbeat_s=0.01, log=log) as stages:
        stages.started(1, "a")
        stages.done(1, "a")
    assert buffer.getvalue() == ""
