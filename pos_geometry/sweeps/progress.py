"""The progress bar of a sweep (rich, on stderr): checkpoints done, bytes read, failures, ETA."""

from __future__ import annotations

from typing import Any

__all__ = ["SweepProgress"]


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


class SweepProgress:
    """``with SweepProgress(total, label, show) as bar: bar.advance(record)``; does nothing when not shown.

    ``show=None`` shows it when stderr is a terminal or in Jupyter (not under ``--quiet``); a callable is
    called with ``(checkpoints done, total)`` instead.
    """

    def __init__(self, total: int, label: str, show: Any = None) -> None:
        from pos_geometry import _progress

        self.total, self.label = total, label
        self.report = _progress.check_progress(show) if callable(show) else None
        self.show = _progress.shown(show)
        self.done = 0
        self.bytes_read = 0
        self.failed = 0
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepProgress:
        if self.show:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            from pos_geometry import _progress

            self._progress = _progress.new_bar(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("checkpoints · {task.fields[bytes]} read · {task.fields[failed]} failed"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                show=True, transient=False,
            )  # fmt: skip
            self._progress.__enter__()  # live: the analyses of each checkpoint add their lines to it
            self._task = self._progress.add_task(self.label, total=self.total, bytes="0 B", failed=0)
        return self

    def advance(self, bytes_read: int = 0, failed: bool = False, n: int = 1) -> None:
        self.bytes_read += bytes_read
        self.failed += int(failed)
        self.done += n
        if self.report is not None:
            self.report(self.done, self.total)
        if self._progress is not None:
            self._progress.update(self._task, advance=n, bytes=_size(self.bytes_read), failed=self.failed)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
