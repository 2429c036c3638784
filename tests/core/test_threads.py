"""The CPU pool of the nulls and the atlas: results in order, errors raised, torch's thread count restored,
and no pool inside a pool or off the main thread."""

from __future__ import annotations

import threading
from contextvars import ContextVar

import pytest
import torch

from pos_geometry._threads import cpu_workers, one_thread_per_kernel, parallel_map

_seen: ContextVar[str] = ContextVar("seen", default="unset")


def test_parallel_map_returns_results_in_order_with_torch_single_threaded_in_the_workers():
    before = torch.get_num_threads()
    seen = []

    def work(i: int) -> tuple[int, float]:
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        a = torch.full((64, 64), float(i), dtype=torch.float64)
        return i, float((a @ a)[0, 0])

    got = parallel_map(work, list(range(12)), 2)
    assert got == [(i, 64.0 * i * i) for i in range(12)]
    assert all(name.startswith("pos_geometry") and n == 1 for name, n in seen)
    assert torch.get_num_threads() == before  # restored after the pool


def test_one_item_or_one_worker_runs_in_the_callers_thread():
    names = parallel_map(lambda _: threading.current_thread().name, [0, 1, 2], 1)
    assert names == [threading.current_thread().name] * 3
    assert parallel_map(lambda _: threading.current_thread().name, [0], 4) == [
        threading.current_thread().name
    ]


def test_the_first_error_is_raised_and_the_thread_count_restored():
    before = torch.get_num_threads()

    def work(i: int) -> int:
        if i == 3:
            raise ValueError("item 3 is bad")
        return i

    with pytest.raises(ValueError, match="item 3 is bad"):
        parallel_map(work, list(range(8)), 2)
    assert torch.get_num_threads() == before


def test_workers_see_the_callers_context_variables():
    token = _seen.set("from the caller")
    try:
        assert parallel_map(lambda _: _seen.get(), [0, 1, 2, 3], 2) == ["from the caller"] * 4
    finally:
        _seen.reset(token)


def test_cpu_workers_is_torchs_thread_count_on_the_main_thread_only():
    assert cpu_workers("cpu") == max(1, torch.get_num_threads())
    assert cpu_workers(torch.device("meta")) == 1  # an accelerator (or any non-CPU device): one stream
    with one_thread_per_kernel() as saved:  # a pool is running (an atlas, a null): no pool inside it
        assert saved >= 1 and torch.get_num_threads() == 1
        assert cpu_workers("cpu") == 1
    got = []
    worker = threading.Thread(target=lambda: got.append(cpu_workers("cpu")))  # a sweep's worker thread
    worker.start()
    worker.join()
    assert got == [1]


def test_nested_users_share_one_save_and_restore():
    before = torch.get_num_threads()
    with one_thread_per_kernel() as outer:
        with one_thread_per_kernel() as inner:
            assert outer == inner == before
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 1  # the outer user is still inside
    assert torch.get_num_threads() == before


def test_a_failure_stops_the_running_pieces_at_their_next_check():
    # one piece fails at once; the other runs a long loop that checks between its steps: it stops there
    # instead of running its 2000 steps to the end, and the failure is what the caller sees
    import time

    from pos_geometry._threads import Stopped, check_stop

    steps = []

    def work(i: int) -> int:
        if i == 0:
            time.sleep(0.05)
            raise RuntimeError("piece 0 failed")
        for step in range(2000):
            check_stop()
            steps.append(step)
            time.sleep(0.005)
        return i

    with pytest.raises(RuntimeError, match="piece 0 failed"):
        parallel_map(work, [0, 1], 2)
    assert 0 < len(steps) < 2000
    check_stop()  # outside a pool: nothing to stop
    assert issubclass(Stopped, Exception)
