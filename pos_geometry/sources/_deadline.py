"""One overall deadline per load, on top of the per-read timeouts of the HTTP client.

A per-read timeout does not stop a server that trickles a byte every half second. Every
network step of a load (the repo listing, ``config.json``, each HEAD and range request, each
chunk of a body) asks :func:`remaining` how long it may still take; once the deadline has
passed it raises :class:`~pos_geometry.errors.RemoteError`.

The deadline is :data:`DEFAULT_LOAD_TIMEOUT` seconds, or ``$POS_GEOMETRY_LOAD_TIMEOUT``. It
starts when the outermost :func:`deadline` block is entered (``pos_geometry.load`` opens one)
and nested blocks keep it. Outside any block no deadline applies.

A step that cannot check the clock itself (a server that trickles its status line and headers,
``huggingface_hub``'s metadata calls, which sleep through a ``Retry-After`` between their own
retries) runs through :func:`bounded`: in a worker thread that the caller stops waiting for when
the deadline passes. The worker is left to end on the HTTP client's own per-read timeout; what it
returns after that is discarded (an open response is closed).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from pos_geometry.errors import InvalidArgumentError, RemoteError

__all__ = ["DEFAULT_LOAD_TIMEOUT", "ENV_VAR", "bounded", "deadline", "load_timeout", "remaining", "timed"]

T = TypeVar("T")

DEFAULT_LOAD_TIMEOUT = 300.0
"""Seconds one load may spend on the network in all (reading a table takes a few)."""
ENV_VAR = "POS_GEOMETRY_LOAD_TIMEOUT"

_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("pos_geometry_deadline", default=None)


def load_timeout() -> float:
    """``$POS_GEOMETRY_LOAD_TIMEOUT`` in seconds (a positive number), else :data:`DEFAULT_LOAD_TIMEOUT`."""
    text = os.environ.get(ENV_VAR, "").strip()
    if not text:
        return DEFAULT_LOAD_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise InvalidArgumentError(
            f"{ENV_VAR} must be a positive number of seconds (the overall network deadline of one load); "
            f"got {text[:40]!r}. Unset it for the default of {DEFAULT_LOAD_TIMEOUT:g} s."
        )
    return value


@contextlib.contextmanager
def deadline(seconds: float | None = None) -> Iterator[None]:
    """Start the deadline (``seconds``, default :func:`load_timeout`) unless one is running."""
    if _DEADLINE.get() is not None:
        yield
        return
    budget = load_timeout() if seconds is None else seconds
    token = _DEADLINE.set((time.monotonic() + budget, budget))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def timed(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` run inside :func:`deadline`: a network step of its own (an atlas's q/k read, a checkpoint's
    header) gets the whole budget, and inside a load it shares the load's."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        with deadline():
            return fn(*args, **kwargs)

    return wrapper


def remaining(url: str, cap: float | None = None) -> float | None:
    """Seconds left for a network step on ``url`` (at most ``cap``); ``cap`` when no deadline runs.

    Raises:
        RemoteError: the deadline has passed (the message names ``url`` and how to change it).
    """
    current = _DEADLINE.get()
    if current is None:
        return cap
    end, budget = current
    left = end - time.monotonic()
    if left <= 0:
        raise _expired(url, budget)
    return left if cap is None else min(cap, left)


def _expired(url: str, budget: float) -> RemoteError:
    return RemoteError(
        f"the load did not finish within its {budget:g} s deadline; it stopped while reading {url}. "
        f"The server is too slow (or trickling). Retry later, or raise the limit with {ENV_VAR}=<seconds>."
    )


def bounded(call: Callable[[], T], url: str, *, discard: Callable[[Any], None] | None = None) -> T:
    """``call()``, but given up with the deadline's :class:`RemoteError` once the deadline passes.

    Without a running deadline ``call`` runs in the caller's thread. With one, it runs in a daemon
    thread (in a copy of the caller's context, so nested steps see the same deadline) and the caller
    waits for it until the deadline. A call given up keeps running until the HTTP client's own
    timeouts end it; ``discard`` is then applied to whatever it returns (close a response).
    Exceptions of ``call`` are re-raised in the caller.
    """
    current = _DEADLINE.get()
    if current is None:
        return call()
    end, budget = current
    remaining(url)  # already past: raise before starting anything
    ctx = contextvars.copy_context()
    lock = threading.Lock()
    done = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = ctx.run(call)
        except BaseException as exc:  # handed to the caller (or dropped, if it gave up)
            box["error"] = exc
        with lock:
            done.set()
            abandoned = box.get("abandoned", False)
        if abandoned and "value" in box and discard is not None:
            with contextlib.suppress(Exception):
                discard(box["value"])

    threading.Thread(target=work, name="pos_geometry-request", daemon=True).start()
    while not done.wait(timeout=max(0.0, end - time.monotonic())):
        with lock:
            if done.is_set():
                break
            if time.monotonic() >= end:
                box["abandoned"] = True
                raise _expired(url, budget)
    if "error" in box:
        raise box["error"]
    return box["value"]
