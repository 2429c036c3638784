"""What the nulls share per table (:mod:`pos_geometry.analysis.nulls.basis`): computed once however many threads
ask at the same moment, the waiting threads working meanwhile, and a failed computation left to the next asker."""

from __future__ import annotations

import threading
import time

import pytest

from pos_geometry._threads import cpu_workers, parallel_map
from pos_geometry.analysis.nulls.basis import once


def test_once_computes_a_value_once_and_the_waiters_take_the_pools_pieces():
    dec: dict = {}
    calls: list[str] = []
    pieces: list[str] = []

    def piece(i: int) -> int:
        pieces.append(threading.current_thread().name)
        time.sleep(0.02)
        return i

    def compute() -> int:
        calls.append(threading.current_thread().name)
        time.sleep(0.03)  # the other item asks meanwhile
        return sum(parallel_map(piece, list(range(8)), cpu_workers("cpu")))

    got = parallel_map(lambda _: once(dec, "value", compute), [0, 1], 2)
    assert got == [28, 28] and len(calls) == 1  # one computation, both answered
    assert len(set(pieces)) == 2  # the waiting thread ran pieces of it
    assert "value" in dec and not dec["pending"]  # nothing left pending


def test_a_failed_computation_is_left_to_the_next_asker():
    dec: dict = {}
    attempts: list[int] = []

    def compute() -> str:
        attempts.append(1)
        time.sleep(0.03)
        if len(attempts) == 1:
            raise RuntimeError("first attempt fails")
        return "second"

    def ask(i: int) -> str:
        time.sleep(0.01 * i)  # item 1 asks while item 0 computes
        try:
            return once(dec, "value", compute)
        except RuntimeError as exc:
            return str(exc)

    got = parallel_map(ask, [0, 1], 2)
    assert got == ["first attempt fails", "second"]  # the waiter computed it after the failure
    assert len(attempts) == 2 and dec["value"] == "second"
    with pytest.raises(KeyError):
        dec["pending"]["value"]
