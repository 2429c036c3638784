"""Progress bars for work that takes seconds: rich, on stderr, in a terminal or in Jupyter; silent otherwise.

One bar is live at a time (rich allows one live display): work that runs inside another's bar (the
analyses of a CLI command, the nulls of :func:`pos_geometry.analyze`) adds its line to that bar instead
of opening a second one.

The ``progress`` argument takes the same values everywhere (:data:`Progress`): True or False forces the bar
on or off; None (the default everywhere) shows it when stderr is a terminal or the code runs in Jupyter, and
never under the CLI's ``--quiet`` or with ``--json``/``--csv`` output (:func:`set_quiet`); a callable is
called with ``(done, total)`` as the work advances instead of drawing a bar.

Inner loops report with :func:`advance` (a no-op when no task is open), so they need no argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["Progress", "advance", "check_progress", "new_bar", "set_quiet", "shown", "task"]

Progress = bool | Callable[[int, int], None] | None
"""What every ``progress`` argument accepts: True, False, None (a bar when stderr is a terminal or in Jupyter),
or a callable ``(done, total)``."""

_bar: ContextVar[Any] = ContextVar("pos_geometry_bar", default=None)
_advance: ContextVar[Callable[[int], None] | None] = ContextVar("pos_geometry_advance", default=None)
_settings = {"quiet": False}


def set_quiet(quiet: bool) -> None:
    """Silence every bar that is not forced on (the CLI's ``--quiet``, ``--json`` and ``--csv``)."""
    _settings["quiet"] = bool(quiet)


def check_progress(progress: object) -> Progress:
    """``progress`` itself when it is one of the values :data:`Progress` allows, else InvalidArgumentError."""
    if progress is None or isinstance(progress, bool) or callable(progress):
        return progress  # type: ignore[return-value]
    from pos_geometry.errors import InvalidArgumentError

    raise InvalidArgumentError(
        f"progress must be True, False, None (a bar in a terminal or Jupyter) or a callable (done, total); "
        f"got {progress!r:.80} ({type(progress).__name__})."
    )


def shown(show: Progress) -> bool:
    """Whether a bar with this ``show`` setting appears (see the module docstring); never for a callable."""
    if callable(show):
        return False
    if show is not None:
        return bool(show)
    if _settings["quiet"]:
        return False
    from rich.console import Console

    console = Console(stderr=True)
    return console.is_terminal or console.is_jupyter


def new_bar(*columns: Any, show: bool | None = None, transient: bool = True, **kwargs: Any) -> Any:
    """A rich bar on stderr, disabled unless :func:`shown`, that inner work adds its lines to while it is
    entered (``with new_bar() as bar``). ``columns`` default to description, bar, done/total, elapsed."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    class LiveBar(Progress):
        def __enter__(self) -> LiveBar:
            self._token = _bar.set(self)
            return super().__enter__()

        def __exit__(self, *exc: object) -> None:
            super().__exit__(*exc)
            _bar.reset(self._token)

    columns = columns or (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    return LiveBar(
        *columns, console=Console(stderr=True), transient=transient, disable=not shown(show), **kwargs
    )


@contextmanager
def task(description: str, total: float, *, show: Progress = None) -> Iterator[Callable[[int], None]]:
    """A line ``description`` on the live bar (a new bar when none is live and :func:`shown`); yields
    ``advance(n)``, which :func:`advance` also reaches from inner loops. The line is removed at the end.
    Inside another task no line is added: the outer task's line counts the work. With a callable ``show``
    no bar is drawn: it is called with ``(done, total)`` at every advance."""
    show = check_progress(show)
    if callable(show):
        done = [0]

        def report(n: int = 1) -> None:
            done[0] += n
            show(int(done[0]), int(total))

        token = _advance.set(report)
        try:
            yield report
        finally:
            _advance.reset(token)
        return
    outer = _advance.get()
    if outer is not None:  # inside another task (the helix nulls of analyze): its line counts this work
        yield outer
        return
    bar = _bar.get()
    opened = None
    if bar is None:
        if not shown(show):
            token = _advance.set(None)
            try:
                yield lambda n=1: None
            finally:
                _advance.reset(token)
            return
        opened = bar = new_bar(show=True)
        bar.__enter__()
    tid = bar.add_task(description, total=total)

    def step(n: int = 1) -> None:
        bar.update(tid, advance=n)

    token = _advance.set(step)
    try:
        yield step
    finally:
        _advance.reset(token)
        bar.remove_task(tid)
        if opened is not None:
            opened.__exit__(None, None, None)


def advance(n: int = 1) -> None:
    """Advance the innermost open :func:`task` by ``n`` (nothing when none is open)."""
    step = _advance.get()
    if step is not None:
        step(n)
