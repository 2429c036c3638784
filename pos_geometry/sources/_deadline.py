"""One overall deadline per load, on top of the per-read timeouts of the HTTP client.

A per-read timeout does not stop a server that trickles a byte every half second. Every
network step of a load (the repo listing, ``config.json``, each HEAD and range request, each
chunk of a body) asks :func:`remaining` how long it may still take; once the deadline has
passed it raises :class:`~pos_geometry.errors.RemoteError`.

The deadline is :data:`DEFAULT_LOAD_TIMEOUT` seconds, or ``$POS_GEOMETRY_LOAD_TIMEOUT``. It
starts when the outermost :func:`deadline` block is entered (``pos_geometry.load`` opens one)
and nested blocks keep it. Outside any block no deadline applies.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from contextvars import ContextVar

from pos_geometry.errors import InvalidArgumentError, RemoteError

__all__ = ["DEFAULT_LOAD_TIMEOUT", "ENV_VAR", "load_timeout", "deadline", "remaining"]

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
        raise RemoteError(
            f"the load did not finish within its {budget:g} s deadline; it stopped while reading {url}. "
            f"The server is too slow (or trickling). Retry later, or raise the limit with {ENV_VAR}=<seconds>."
        )
    return left if cap is None else min(cap, left)
