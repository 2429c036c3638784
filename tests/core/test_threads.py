"""The CPU pool of the nulls and the analyses: results in order, errors raised, torch's thread count restored,
no threads opened off the main thread, and a map inside an item shared with the pool's idle threads."""

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
    assert all(n == 1 for _, n in seen)  # the caller and the helpers alike
    assert {name for name, _ in seen} <= {threading.current_thread().name, "pos_geometry-0"}
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


def test_a_map_inside_an_item_is_shared_with_the_pools_idle_threads():
    # two items: the first returns at once, the second runs an inner map of 12 slow items. The inner map opens
    # no threads of its own; the pool's other thread, idle after the first item, takes inner items too.
    import time

    inner_threads = []

    def inner(i: int) -> int:
        inner_threads.append(threading.current_thread().name)
        time.sleep(0.02)
        return i * i

    def outer(i: int) -> list[int]:
        if i == 0:
            return []
        assert cpu_workers("cpu") == 2  # inside the pool: the pool's width
        return parallel_map(inner, list(range(12)), cpu_workers("cpu"))

    before = threading.active_count()
    got = parallel_map(outer, [0, 1], 2)
    assert got == [[], [i * i for i in range(12)]]
    assert len(set(inner_threads)) == 2 and len(inner_threads) == 12
    assert threading.active_count() == before  # the helpers are gone


def test_results_do_not_depend_on_who_runs_them():
    # nested maps three deep, on 1, 2 and 4 threads: the same results in the same order
    def leaf(i: int) -> float:
        return float(torch.arange(i + 1, dtype=torch.float64).square().sum())

    def middle(i: int) -> list[float]:
        return parallel_map(leaf, list(range(i, i + 5)), cpu_workers("cpu"))

    def top(i: int) -> list[list[float]]:
        return parallel_map(middle, list(range(i, i + 3)), cpu_workers("cpu"))

    expected = [[[leaf(k) for k in range(j, j + 5)] for j in range(i, i + 3)] for i in range(4)]
    for workers in (1, 2, 4):
        assert parallel_map(top, list(range(4)), workers) == expected


def test_an_error_in_an_inner_map_reaches_the_outer_caller():
    def inner(i: int) -> int:
        if i == 5:
            raise KeyError("inner item 5")
        return i

    def outer(i: int) -> list[int]:
        return parallel_map(inner, list(range(8)), cpu_workers("cpu")) if i == 1 else [i]

    with pytest.raises(KeyError, match="inner item 5"):
        parallel_map(outer, [0, 1, 2], 2)


def test_an_interrupt_in_an_item_stops_the_pool_and_reaches_the_caller():
    # a Ctrl-C delivered while an item runs (here raised by the item itself) is what the caller sees, the
    # other items stop at their next check, the helpers are gone and torch's thread count is back
    import time

    from pos_geometry._threads import check_stop

    before_threads, before_torch = threading.active_count(), torch.get_num_threads()
    steps = []

    def work(i: int) -> int:
        if i == 1:
            time.sleep(0.05)
            raise KeyboardInterrupt
        for step in range(2000):
            check_stop()
            steps.append(step)
            time.sleep(0.005)
        return i

    with pytest.raises(KeyboardInterrupt):
        parallel_map(work, [0, 1, 2, 3], 2)
    assert 0 < len(steps) < 2000
    assert threading.active_count() == before_threads and torch.get_num_threads() == before_torch


def test_until_returns_the_shortest_prefix_it_holds_for_on_any_number_of_threads():
    # the prefix test "three of the results are multiples of 7" first holds after item 21 (0, 7, 14, 21 ...:
    # 0 counts): the same 15 results, in order, on 1, 2 and 4 threads, and inside another map
    def until(results: list[int]) -> bool:
        return sum(r % 7 == 0 for r in results) >= 3

    expected = list(range(15))
    for workers in (1, 2, 4):
        assert parallel_map(lambda i: i, list(range(40)), workers, until=until) == expected

    def outer(i: int) -> list[int]:
        return parallel_map(lambda j: j, list(range(40)), cpu_workers("cpu"), until=until)

    assert parallel_map(outer, [0, 1, 2], 2) == [expected] * 3
    # never met: every result
    assert parallel_map(lambda i: i, list(range(6)), 2, until=until) == list(range(6))


def test_until_starts_no_item_past_a_finished_prefix_that_passed():
    import time

    started = []

    def work(i: int) -> int:  # the first four at once, the others slowly
        started.append(i)
        time.sleep(0.05 if i >= 4 else 0.0)
        return i

    for workers in (1, 2):
        started.clear()
        got = parallel_map(work, list(range(50)), workers, until=lambda results: len(results) >= 4)
        assert got == [0, 1, 2, 3]
        # items are taken in order; once item 3 is done no other starts (one may be running on the other
        # thread), where all 50 would take 2.3 s
        assert sorted(started) == list(range(len(started))) and len(started) <= 4 + 2 * (workers - 1)


def test_an_error_in_the_until_test_is_raised():
    def until(results: list[int]) -> bool:
        if len(results) == 3:
            raise ZeroDivisionError("the test failed")
        return False

    for workers in (1, 2):
        with pytest.raises(ZeroDivisionError, match="the test failed"):
            parallel_map(lambda i: i, list(range(10)), workers, until=until)


def test_numpy_s_blas_runs_one_thread_inside_the_pool_and_every_library_is_restored_after():
    """Inside a pool NumPy's and SciPy's OpenBLAS run one thread each (their small solves would otherwise start a
    thread per core beside the pool's own); after it every library has its thread count again, torch's OpenMP
    included (restoring the BLAS limit must not undo torch's own setting)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import numpy as np

    np.linalg.eigh(np.eye(4))  # BLAS loaded
    before = {(i["internal_api"], i["filepath"]): i["num_threads"] for i in threadpoolctl.threadpool_info()}
    torch_before = torch.get_num_threads()
    inside = []

    def work(_: int) -> None:
        inside.extend(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")

    parallel_map(work, [0, 1, 2], 2)
    assert inside and set(inside) == {1}
    after = {(i["internal_api"], i["filepath"]): i["num_threads"] for i in threadpoolctl.threadpool_info()}
    assert after == before and torch.get_num_threads() == torch_before


def test_a_thread_waiting_on_a_flag_runs_the_pools_items_meanwhile():
    # item 0 raises the flag only after an inner map of 8 slow pieces; item 1 waits on the flag at once. Blocked,
    # it would leave the inner map to item 0's thread alone; waiting on the flag, it takes inner pieces too.
    import time

    from pos_geometry._threads import Flag

    flag = Flag()
    ran: list[str] = []

    def piece(i: int) -> int:
        ran.append(threading.current_thread().name)
        time.sleep(0.02)
        return i

    def item(i: int) -> str:
        if i == 0:
            time.sleep(0.05)  # item 1 is waiting before the inner map opens
            parallel_map(piece, list(range(8)), cpu_workers("cpu"))
            flag.set()
            return "set"
        flag.wait()
        return "waited"

    assert parallel_map(item, [0, 1], 2) == ["set", "waited"]
    assert len(ran) == 8 and len(set(ran)) == 2  # both threads ran pieces of the inner map


def test_a_flag_outside_a_pool_blocks_until_set():
    from pos_geometry._threads import Flag

    flag, seen = Flag(), []
    waiter = threading.Thread(target=lambda: (flag.wait(), seen.append(flag.is_set())))
    waiter.start()
    waiter.join(0.05)
    assert waiter.is_alive() and not seen  # still waiting
    flag.set()
    waiter.join(5)
    assert seen == [True]
    flag.wait()  # raised: returns at once
