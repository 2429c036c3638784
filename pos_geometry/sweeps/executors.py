"""Where the per-checkpoint work runs: a local thread pool (default) or Dask distributed.

**The choice, and why.** The work per checkpoint is a few range requests (I/O bound, waiting on the
network) followed by numpy/torch/scipy analyses that release the GIL in their heavy parts. A local
pool of threads overlaps the waiting of many checkpoints (the bounded number of threads is the bound
on parallel range reads, each over one of huggingface_hub's keep-alive connections) and needs no
process start-up or data copies. To go past one machine the same task function runs on **Dask
distributed**: it is light (pure Python, ``pip install pos-geometry[cluster]``), PyData-native (numpy
results travel as is), schedules plain functions without a framework of its own to adopt, and runs
the same on a laptop (``LocalCluster``), an SSH/Kubernetes/SLURM cluster (``dask-jobqueue``,
``dask-kubernetes``) or a managed one, from a scheduler address or an existing ``Client``. Ray would
do too, but brings a larger runtime and its own object store that this workload does not need.

A pool of threads runs the checkpoints side by side, so each one's kernels run on one thread (torch's and the
BLAS libraries', :func:`~pos_geometry._threads.one_thread_per_kernel`, restored when the sweep ends): with the
threads of every checkpoint's kernels on top of the pool's own, the cores were oversubscribed and BLAS threads
spun while another held the core.

Every backend runs the same pure task (:func:`~pos_geometry.sweeps.task.run_checkpoint`) on the same
inputs; results are collected and stored by the calling process, so they do not depend on the executor.
Dask is imported only when asked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor, as_completed
from typing import Any

from pos_geometry._describe import describe
from pos_geometry._threads import one_thread_per_kernel
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sweeps.record import Outcome
from pos_geometry.sweeps.task import CheckpointTask, run_checkpoint

__all__ = ["DEFAULT_WORKERS", "describe_executor", "run_tasks"]

DEFAULT_WORKERS = 8
"""Checkpoints in flight on the local pool (each reads over one keep-alive connection at a time)."""


def _is_dask_client(obj: Any) -> bool:
    return type(obj).__name__ == "Client" and type(obj).__module__.startswith("distributed")


def _check(executor: Any) -> None:
    ok = (
        executor == "local"
        or (isinstance(executor, str) and "://" in executor)
        or isinstance(executor, Executor)
        or _is_dask_client(executor)
    )
    if not ok:
        raise InvalidArgumentError(
            "executor must be 'local' (a thread pool), a Dask scheduler address such as 'tcp://host:8786', a "
            f"dask.distributed.Client, or a concurrent.futures.Executor; got {describe(executor)}."
        )
    if isinstance(executor, str) and executor != "local":
        _check_address(executor)


_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")


def _check_address(address: str) -> None:
    """A Dask scheduler address ``scheme://host[:port]``, checked before any work (Dask's own parser raises
    an untyped error, and only when the sweep starts)."""
    from urllib.parse import urlsplit

    why = ""
    try:
        parts = urlsplit(address)
        port = parts.port  # parses the port: raises ValueError when it is not a number in 0-65535
    except ValueError as exc:
        why, parts, port = str(exc), None, None
    if not why and parts is not None:
        if parts.scheme not in _SCHEMES:
            why = f"the scheme must be one of {', '.join(_SCHEMES)}"
        elif not parts.hostname:
            why = "it names no host"
        elif parts.path not in ("", "/") or parts.query or parts.fragment:
            why = "a scheduler address has no path, query or fragment"
        elif port == 0:
            why = "port 0 is not a scheduler's port"
    if why:
        raise InvalidArgumentError(
            f"executor {describe(address)} is not a Dask scheduler address ({why}); give one such as "
            "'tcp://host:8786' or 'tcp://[::1]:8786', or 'local'."
        )


def describe_executor(executor: Any, n_workers: int | None) -> str:
    """A short label recorded in the result (``"local threads (8)"``, ``"dask tcp://..."``); the executor is
    checked first (:class:`InvalidArgumentError`), so a sweep refuses a bad one before any request."""
    _check(executor)
    if executor == "local":
        return f"local threads ({n_workers or DEFAULT_WORKERS})"
    if isinstance(executor, str):
        return f"dask {executor}"
    if _is_dask_client(executor):
        return f"dask {getattr(executor.scheduler, 'address', '') or 'client'}"
    return type(executor).__name__


def _dask_client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise InvalidArgumentError(
            f"executor={address!r} needs Dask distributed, which is not installed. Install it with "
            "`pip install 'pos-geometry[cluster]'` (or `pip install 'dask[distributed]'`)."
        ) from None
    return Client(address)


def _run_dask(client: Any, tasks: Sequence[CheckpointTask]) -> Iterator[Outcome]:
    from distributed import as_completed as dask_completed

    # pure=False: a task is never deduplicated against another client's identical one
    futures = client.map(run_checkpoint, list(tasks), pure=False)
    try:
        for future in dask_completed(futures):
            yield future.result()
    finally:
        client.cancel([f for f in futures if not f.done()])


def _run_pool(pool: Executor, tasks: Sequence[CheckpointTask], own: bool) -> Iterator[Outcome]:
    # threads of this process run the checkpoints side by side: one thread per kernel while they do (a
    # process pool's workers are other processes, which this setting does not reach)
    threads = one_thread_per_kernel() if isinstance(pool, ThreadPoolExecutor) else contextlib.nullcontext()
    with threads:
        futures = [pool.submit(run_checkpoint, t) for t in tasks]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for f in futures:
                f.cancel()
            if own:
                pool.shutdown(wait=False, cancel_futures=True)


def run_tasks(
    tasks: Sequence[CheckpointTask], executor: Any = "local", n_workers: int | None = None
) -> Iterator[Outcome]:
    """Run every task on ``executor``; yield their outcomes as they complete (any order).

    Closing the iterator early (or an exception in the consumer, Ctrl-C included) cancels the tasks not
    started yet. ``n_workers``: threads of the local pool (default :data:`DEFAULT_WORKERS`).
    """
    _check(executor)
    if not tasks:
        return iter(())
    if executor == "local":
        workers = DEFAULT_WORKERS if n_workers is None else n_workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgumentError(f"n_workers must be an integer >= 1; got {n_workers!r}.")
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pos_geometry-sweep")
        return _run_pool(pool, tasks, own=True)
    if isinstance(executor, Executor):
        return _run_pool(executor, tasks, own=False)
    if isinstance(executor, str):
        return _closing(_dask_client(executor), tasks)
    return _run_dask(executor, tasks)


def _closing(client: Any, tasks: Sequence[CheckpointTask]) -> Iterator[Outcome]:
    try:
        yield from _run_dask(client, tasks)
    finally:
        client.close()


def collect(outcomes: Iterator[Outcome], on_outcome: Callable[[Outcome], None]) -> None:
    """Feed every outcome to ``on_outcome``; stop the rest when it (or the wait) raises."""
    try:
        for outcome in outcomes:
            on_outcome(outcome)
    finally:
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()
