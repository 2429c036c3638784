"""Progress lines off a terminal: a line when each stage starts and ends, and one every ten seconds between.

On a terminal the progress bar shows where a long command is. In a log file or a pipe (CI, ``nohup``,
``tee``) it is not drawn, so :class:`StageLog` prints instead, on stderr: ``card [2/6] The learned table:
started``, then ``card [2/6] The learned table: still running (20 s)`` every :data:`HEARTBEAT_S`, then
``card [2/6] The learned table: done in 23 s (31 s in all)``. Stage numbers run 1..n over a fixed ``n`` and a
number names one stage. Nothing is printed on a terminal or with ``--quiet``.
"""

from __future__ import annotations

import threading
import time

from rich.console import Console

__all__ = ["HEARTBEAT_S", "StageLog"]

HEARTBEAT_S = 10.0
"""Seconds between two lines while one stage runs."""


class StageLog:
    """Lines for ``what``'s ``total`` stages (see the module docstring) on ``log`` (default: stderr); use as a
    context manager. ``enabled=False`` prints nothing (a caller whose one stage is its whole output)."""

    def __init__(
        self,
        what: str,
        total: int,
        *,
        heartbeat_s: float = HEARTBEAT_S,
        log: Console | None = None,
        enabled: bool = True,
    ) -> None:
        from pos_geometry import _progress

        self.what, self.total, self.heartbeat_s = what, int(total), float(heartbeat_s)
        self.log = log if log is not None else Console(stderr=True, highlight=False, soft_wrap=True)
        self.active = enabled and not self.log.is_terminal and not _progress._settings["quiet"]
        self.start_time = time.monotonic()
        self.stage: tuple[int, str, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StageLog:
        if self.active:
            self._thread = threading.Thread(target=self._beat, name="pos-geometry-stage-log", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _print(self, text: str) -> None:
        from pos_geometry._escape import terminal_text

        self.log.print(terminal_text(text), markup=False, highlight=False, emoji=False, soft_wrap=True)

    def started(self, number: int, title: str) -> None:
        """Stage ``number`` (1-based) of ``total`` starts."""
        with self._lock:
            self.stage = (int(number), title, time.monotonic())
            if self.active:
                self._print(f"{self.what} [{number}/{self.total}] {title}: started")

    def done(self, number: int, title: str) -> None:
        """Stage ``number`` ends."""
        with self._lock:
            begun = self.stage[2] if self.stage is not None and self.stage[0] == number else time.monotonic()
            self.stage = None
            if self.active:
                now = time.monotonic()
                self._print(
                    f"{self.what} [{number}/{self.total}] {title}: done in {now - begun:.0f} s "
                    f"({now - self.start_time:.0f} s in all)"
                )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with self._lock:
                if self.stage is not None:
                    number, title, begun = self.stage
                    self._print(
                        f"{self.what} [{number}/{self.total}] {title}: still running "
                        f"({time.monotonic() - begun:.0f} s)"
                    )
