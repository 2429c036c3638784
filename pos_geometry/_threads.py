"""CPU parallelism for many small independent kernels: a pool of threads, each running torch single-threaded.

torch's intra-op threads meet at a barrier inside every kernel. For the small kernels of the nulls (one
surrogate's PCA is a few hundred microseconds) and of the rotary atlas (one head: ~1 MiB), that barrier costs
more than the kernel on a busy machine, and two threads on two cores give ~1.2×. Independent pieces of work
(chunks of surrogates, tensors of a checkpoint) run on ``torch.get_num_threads()`` Python threads instead,
each kernel single-threaded: torch releases the GIL inside its kernels, so they run side by side.

:func:`one_thread_per_kernel` sets torch to one thread while a pool runs and restores the caller's setting
after (concurrent users share one save and restore); :func:`parallel_map` is the pool. Neither changes a
result: each piece of work is computed the same way whichever thread runs it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

__all__ = ["Stopped", "check_stop", "cpu_workers", "one_thread_per_kernel", "parallel_map"]

T = TypeVar("T")
R = TypeVar("R")

_stops: contextvars.ContextVar[tuple[threading.Event, ...]] = contextvars.ContextVar(
    "pos_geometry_stops", default=()
)
"""The stop signals of the pools a piece of work runs in (the innermost last)."""

_LOCK = threading.Lock()
_USERS = 0
_SAVED = 1


@contextlib.contextmanager
def one_thread_per_kernel() -> Iterator[int]:
    """Run torch's kernels single-threaded inside the block; yields the thread count torch had.

    The caller parallelises over independent pieces of work with its own threads instead, and torch's
    setting is restored after (concurrent users share one save/restore).
    """
    global _USERS, _SAVED
    with _LOCK:
        if _USERS == 0:
            _SAVED = torch.get_num_threads()
            torch.set_num_threads(1)
        _USERS += 1
        saved = _SAVED
    try:
        yield saved
    finally:
        with _LOCK:
            _USERS -= 1
            if _USERS == 0:
                torch.set_num_threads(_SAVED)


class Stopped(Exception):
    """Raised by :func:`check_stop` in a pool's worker once another piece of work of the pool has failed or the
    caller was interrupted: the worker stops at its next checkpoint instead of running to the end."""


def check_stop() -> None:
    """Raise :class:`Stopped` if a pool this code runs in is stopping; a no-op outside pools. Long loops call it
    between their pieces (the nulls between chunks of surrogates), so that a Ctrl-C or a failure elsewhere is
    not held up by work whose result nobody will read."""
    if any(stop.is_set() for stop in _stops.get()):
        raise Stopped("stopped: another piece of this work failed or was interrupted")


def cpu_workers(device: torch.device | str) -> int:
    """How many threads :func:`parallel_map` should use for work on ``device``: torch's own thread count
    for the CPU when called from the main thread with no pool running (so ``torch.set_num_threads(1)``
    keeps everything on one thread, and a sweep's or an atlas' workers do not open pools of their own);
    1 for an accelerator, whose kernels are queued on one stream anyway."""
    if torch.device(device).type != "cpu":
        return 1
    if threading.current_thread() is not threading.main_thread() or _USERS > 0:
        return 1
    return max(1, torch.get_num_threads())


def parallel_map(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``[fn(item) for item in items]``, on ``workers`` threads with torch single-threaded when
    ``workers > 1`` (and there is more than one item). Results are in the order of ``items``. The first
    exception raised by ``fn`` (or a Ctrl-C while waiting) is raised here, once the items not yet started
    are cancelled and the running ones have stopped at their next :func:`check_stop`. Each call runs in a
    copy of the caller's context, so context variables (the progress bar's) reach it.
    """
    if workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    stop = threading.Event()
    with one_thread_per_kernel(), ThreadPoolExecutor(min(workers, len(items)), "pos_geometry") as pool:
        futures = []
        for item in items:
            context = contextvars.copy_context()
            context.run(_stops.set, (*_stops.get(), stop))
            futures.append(pool.submit(context.run, fn, item))
        try:
            return [future.result() for future in futures]
        except BaseException:  # a failure or Ctrl-C: the running pieces stop at their next check_stop()
            stop.set()
            raise
        finally:
            for future in futures:
                future.cancel()  # the pieces not started
