"""Where a sweep's checkpoints run (``sweeps/executors.py``): a local pool of threads runs them side by side, each
one's kernels on one thread (torch's and BLAS's), and the caller's settings come back when the sweep ends."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from pos_geometry.sweeps import executors


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def seen(monkeypatch):
    """Each task records the threads its kernels would use, and whether it ran off the caller's thread."""
    np.linalg.inv(np.eye(2))  # numpy's BLAS loaded
    got = []

    def task(t):
        got.append(
            (
                t,
                torch.get_num_threads(),
                _blas_threads(),
                threading.current_thread() is threading.main_thread(),
            )
        )
        return t

    monkeypatch.setattr(executors, "run_checkpoint", task)
    return got


@pytest.mark.parametrize("executor", ["local", "threads"])
def test_a_pool_of_threads_runs_each_checkpoint_on_one_thread_and_gives_the_threads_back(seen, executor):
    torch_before = torch.get_num_threads()
    torch.set_num_threads(2)
    limits = threadpool_limits(2, user_api="blas")  # the caller's: two threads each
    blas_before = _blas_threads()
    try:
        pool = ThreadPoolExecutor(2) if executor == "threads" else "local"
        done = list(executors.run_tasks(list(range(6)), pool, n_workers=2))
        if executor == "threads":
            pool.shutdown()
        assert sorted(done) == list(range(6)) and len(seen) == 6
        assert all(threads == 1 and all(b == 1 for b in blas) and not main for _, threads, blas, main in seen)
        assert torch.get_num_threads() == 2 and _blas_threads() == blas_before  # given back
    finally:
        limits.restore_original_limits()
        torch.set_num_threads(torch_before)


def test_a_sweep_abandoned_halfway_gives_the_threads_back(seen):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        outcomes = executors.run_tasks(list(range(6)), "local", n_workers=2)
        next(outcomes)
        assert torch.get_num_threads() == 1  # while the sweep runs
        outcomes.close()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
