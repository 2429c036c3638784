"""CPU parallelism for many small independent kernels: a pool of threads, each running torch single-threaded.

torch's intra-op threads meet at a barrier inside every kernel. For the small kernels of the nulls (one
surrogate's PCA is a few hundred microseconds) and of the rotary atlas (one head: ~1 MiB), that barrier costs
more than the kernel on a busy machine, and two threads on two cores give ~1.2×. Independent pieces of work
(the analyses of ``analyze``, chunks of surrogates, heads of the position-QK view) run on
``torch.get_num_threads()`` Python threads instead, each kernel single-threaded: torch releases the GIL
inside its kernels, so they run side by side. The rotary atlas reads its q/k tensors on the same pool, one
tensor per thread, with as many threads as it wants network streams.

:func:`one_thread_per_kernel` sets torch to one thread while a pool runs and restores the caller's setting
after (concurrent users share one save and restore). :func:`parallel_map` is the pool: one per outermost
call, shared by the maps nested inside its items; ``until`` ends a map at the shortest prefix of its items
whose results pass a test (a sequential null's stop). None of it changes a result: each piece of work is
computed the same way whichever thread runs it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import torch

__all__ = ["Flag", "Stopped", "check_stop", "cpu_workers", "one_thread_per_kernel", "parallel_map"]

T = TypeVar("T")
R = TypeVar("R")

_stops: contextvars.ContextVar[tuple[threading.Event, ...]] = contextvars.ContextVar(
    "pos_geometry_stops", default=()
)
"""The stop signals of the pools a piece of work runs in (the innermost last)."""

_LOCK = threading.Lock()
_USERS = 0
_SAVED = 1
_BLAS: object | None = None


@contextlib.contextmanager
def one_thread_per_kernel() -> Iterator[int]:
    """Run torch's kernels single-threaded inside the block; yields the thread count torch had.

    The caller parallelises over independent pieces of work with its own threads instead, and torch's
    setting is restored after (concurrent users share one save/restore).
    """
    global _USERS, _SAVED, _BLAS
    with _LOCK:
        if _USERS == 0:
            _BLAS = _one_blas_thread()  # first: its restore must not undo torch's own setting
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
                if _BLAS is not None:
                    _BLAS.restore_original_limits()
                    _BLAS = None
                torch.set_num_threads(_SAVED)


def _one_blas_thread() -> object | None:
    """NumPy's and SciPy's BLAS (OpenBLAS) at one thread until restored (None when threadpoolctl, which scikit-learn
    brings, is missing). Their small solves and eigendecompositions inside the pool's threads would otherwise each
    start a BLAS thread per core: on two cores that oversubscription took ``analyze`` of GPT-2 from 5.4 to 7.3 s."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(limits=1, user_api="blas")


class Flag:
    """A one-time signal that a pool's threads wait on while working: :meth:`wait` inside a
    :func:`parallel_map` item runs the pool's other items until :meth:`set` (outside a pool it only blocks).

    What several analyses compute once and share (:func:`pos_geometry.analysis.nulls.basis.once`) is computed
    by the first thread that asks; a second thread asking for it meanwhile used to block, leaving its core idle
    while the first worked alone (the smooth-GP null's five column covariances, one after another). Waiting on
    a flag, it takes the pool's open items instead, the first thread's own pieces among them."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._pools: list[_Pool] = []

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        """Raise the flag and wake every pool thread waiting on it."""
        with self._lock:
            self._event.set()
            pools, self._pools = self._pools, []
        for pool in pools:
            with pool.cond:
                pool.cond.notify_all()

    def wait(self) -> None:
        """Return once the flag is raised; meanwhile, inside a pool, run the pool's items."""
        pool = _pool.get()
        if pool is None:
            self._event.wait()
            return
        with self._lock:
            if self._event.is_set():
                return
            self._pools.append(pool)
        pool.work_until(self._event)


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
    """How many threads :func:`parallel_map` should use for work on ``device``: inside a pool, the pool's own
    (its idle threads take the items); otherwise torch's thread count for the CPU when called from the main
    thread (so ``torch.set_num_threads(1)`` keeps everything on one thread, and a sweep's or an atlas'
    workers do not open pools of their own); 1 for an accelerator, whose kernels are queued on one stream."""
    if torch.device(device).type != "cpu":
        return 1
    pool = _pool.get()
    if pool is not None:
        return pool.workers
    if threading.current_thread() is not threading.main_thread() or _USERS > 0:
        return 1
    return max(1, torch.get_num_threads())


def parallel_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    *,
    until: Callable[[list[R]], bool] | None = None,
) -> list[R]:
    """``[fn(item) for item in items]``, on ``workers`` threads with torch single-threaded when
    ``workers > 1`` (and there is more than one item); results in the order of ``items``.

    ``until``: a test of the results of a prefix of ``items`` (monotone: once true for a prefix, true for
    every longer one). The map then returns the results of the shortest prefix it holds for (all of them if
    none): items past it are not started once a finished prefix passes the test, and the results of any that
    were already running are dropped, so what is returned does not depend on the number of threads.

    The caller runs items itself and ``workers − 1`` helper threads take the others. A ``parallel_map``
    inside an item (the chunks of a null inside an analysis) opens no threads of its own: it offers its
    items to the same pool, whose threads take them whenever their own work is done (oldest offers first),
    so an analysis that finishes early helps the others instead of idling. No thread waits while there is
    an item it could take, and none can wait on itself (a thread only waits on a map opened after every
    item it holds, so waits cannot form a cycle). The first exception raised by
    ``fn`` (or a Ctrl-C) is raised here, once the items already running have stopped at their next
    :func:`check_stop`; the items not started are dropped. Each item runs in a copy of the caller's context,
    so context variables (the progress bar's) reach it.
    """
    if workers <= 1 or len(items) <= 1:
        results: list[R] = []
        for item in items:
            results.append(fn(item))
            if until is not None and until(results):
                break
        return results
    pool = _pool.get()
    if pool is not None:
        return pool.share(fn, items, until)
    with one_thread_per_kernel():
        pool = _Pool(workers)
        helpers = [
            threading.Thread(target=pool.help, name=f"pos_geometry-{k}", daemon=True)
            for k in range(workers - 1)
        ]
        for helper in helpers:
            helper.start()
        try:
            return pool.share(fn, items, until)
        finally:
            pool.close()
            for helper in helpers:
                helper.join()


_pool: contextvars.ContextVar[_Pool | None] = contextvars.ContextVar("pos_geometry_pool", default=None)
"""The pool the current item runs in (None outside pools)."""


class _Map:
    """One :func:`parallel_map` call's items, offered to a pool's threads (state guarded by the pool's lock)."""

    def __init__(
        self, pool: _Pool, fn: Callable[[T], R], items: Sequence[T], until: Callable[[list], bool] | None
    ) -> None:
        self.fn, self.items, self.until = fn, items, until
        self.stop = threading.Event()
        self.enough = False  # a finished prefix passed ``until``: no further item is started
        stops = (*_stops.get(), self.stop)
        self.contexts = []
        for _ in items:  # one context per item: a context cannot be entered by two threads at once
            context = contextvars.copy_context()
            context.run(_stops.set, stops)
            context.run(_pool.set, pool)
            self.contexts.append(context)
        self.results: list = [None] * len(items)
        self.error: BaseException | None = None
        self.claimed = self.done = self.prefix = 0
        self.finished_items: set[int] = set()
        self.finished = threading.Event()

    def claim(self) -> int | None:
        """The next item not yet taken, or None when none is left (or the map is stopping, or has enough)."""
        if self.stop.is_set() or self.enough or self.claimed >= len(self.items):
            return None
        self.claimed += 1
        return self.claimed - 1

    def finish(self, index: int) -> None:
        """Item ``index`` is done: count it, and test the finished prefix against ``until``."""
        self.done += 1
        self.finished_items.add(index)
        while not self.enough and self.error is None and self.prefix in self.finished_items:
            self.prefix += 1  # once enough, ``prefix`` stays: the shortest prefix that passed
            try:
                self.enough = self.until is not None and bool(self.until(self.results[: self.prefix]))
            except Exception as exc:  # a failing test fails the map, like a failing item
                self.error = exc
                self.stop.set()
        self.settle()

    def settle(self) -> None:
        """Mark the map finished once every item taken is done and no other will be."""
        last = self.claimed == len(self.items) or self.stop.is_set() or self.enough
        if self.done == self.claimed and last:
            self.finished.set()


class _Pool:
    """The helper threads of an outermost :func:`parallel_map` and the maps they take items from."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.cond = threading.Condition()
        self.maps: list[_Map] = []
        self.closed = threading.Event()

    def share(
        self, fn: Callable[[T], R], items: Sequence[T], until: Callable[[list[R]], bool] | None = None
    ) -> list[R]:
        """Offer ``items`` to the pool's threads and work until every one is done (or a finished prefix
        passes ``until``): this map's items first, then, while others' threads finish this map's last items,
        any other map's."""
        work = _Map(self, fn, items, until)
        with self.cond:
            self.maps.append(work)
            self.cond.notify_all()
        try:
            while True:
                with self.cond:
                    work.settle()
                    if work.finished.is_set():
                        break
                    index = work.claim()
                    job = (work, index) if index is not None else self._claim()
                    if job is None:
                        self.cond.wait()
                        continue
                self._run(*job)
        except BaseException:  # a Ctrl-C here: the items running elsewhere stop at their next check_stop()
            work.stop.set()
            with self.cond:
                work.settle()
            work.finished.wait()
            raise
        finally:
            with self.cond:
                self.maps.remove(work)
        if work.error is not None:
            raise work.error
        return work.results[: work.prefix] if work.enough else work.results

    def help(self) -> None:
        """A helper thread: take items, oldest maps first (the longest pieces start early), until the pool
        closes (after the outermost map returned, so no item is left)."""
        self.work_until(self.closed)

    def work_until(self, event: threading.Event) -> None:
        """Take items (oldest maps first) until ``event`` is set: a thread waiting on a :class:`Flag`. Whoever
        sets it notifies this pool (:meth:`Flag.set`), so the check and the wait below cannot miss it."""
        while True:
            with self.cond:
                if event.is_set():
                    return
                job = self._claim()
                if job is None:
                    self.cond.wait()
                    continue
            self._run(*job)

    def close(self) -> None:
        with self.cond:
            self.closed.set()
            self.cond.notify_all()

    def _claim(self) -> tuple[_Map, int] | None:
        for work in self.maps:
            index = work.claim()
            if index is not None:
                return work, index
        return None

    def _run(self, work: _Map, index: int) -> None:
        try:
            work.results[index] = work.contexts[index].run(work.fn, work.items[index])
        except BaseException as exc:  # the first error is the map's; the other items stop
            with self.cond:
                if work.error is None or (isinstance(work.error, Stopped) and not isinstance(exc, Stopped)):
                    work.error = exc  # a real failure wins over a piece that only stopped
            work.stop.set()
        finally:
            with self.cond:
                work.finish(index)
                self.cond.notify_all()  # a caller may be waiting for this item
