"""visit_ranges: the same rows whether a source is read by offset or streamed in chunks of any size."""

from __future__ import annotations

import random

import pytest

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sources.byte_source import BytesSource
from pos_geometry.sources.row_ranges import check_ranges, visit_ranges

ROW = 12
DATA = bytes(random.Random(0).getrandbits(8) for _ in range(7 + 40 * ROW + 5))  # 7 bytes before the tensor


class _Streaming(BytesSource):
    """A source whose stream_to hands over its bytes in chunks of random sizes (1 byte to several rows),
    recording each request, as a ranged HTTP body arrives."""

    def __init__(self, data: bytes, seed: int) -> None:
        super().__init__(data)
        self.rng, self.requests = random.Random(seed), []

    def stream_to(self, offset, length, sink):
        self.requests.append((offset, length))
        at = offset
        while at < offset + length:
            n = min(self.rng.choice([1, 5, ROW, 3 * ROW + 1, 1000]), offset + length - at)
            sink(memoryview(self.data[at : at + n]))
            at += n


def _collect(src, ranges):
    seen = []
    buffer = memoryview(bytearray(max(b - a for a, b in ranges) * ROW))
    visit_ranges(src, 7, ROW, ranges, buffer, lambda i, view: seen.append((i, bytes(view))))
    return seen


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(
    "ranges", [((0, 40),), ((0, 3), (3, 9), (20, 21), (39, 40)), ((5, 6),), ((2, 10), (30, 38))]
)
def test_streamed_and_read_rows_are_the_rows(ranges, seed):
    expected = [(i, DATA[7 + a * ROW : 7 + b * ROW]) for i, (a, b) in enumerate(ranges)]
    assert _collect(BytesSource(DATA), ranges) == expected
    streaming = _Streaming(DATA, seed)
    assert _collect(streaming, ranges) == expected
    # one request, from the first range's start to the last range's stop: nothing outside is transferred
    assert streaming.requests == [(7 + ranges[0][0] * ROW, (ranges[-1][1] - ranges[0][0]) * ROW)]


def test_a_visitor_error_stops_the_stream():
    streaming = _Streaming(DATA, 1)
    calls = []

    def visit(i, view):
        calls.append(i)
        if i == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        visit_ranges(streaming, 7, ROW, ((0, 2), (2, 4), (4, 6)), memoryview(bytearray(2 * ROW)), visit)
    assert calls == [0, 1]


@pytest.mark.parametrize(
    "bad", [[(3, 2)], [(0, 4), (3, 6)], [(5, 6), (0, 1)], [(0, 41)], [(-1, 2)], [(2, 2)]]
)
def test_ranges_must_be_increasing_disjoint_and_within(bad):
    with pytest.raises(InvalidArgumentError, match="increasing and non-overlapping within its 40 rows"):
        check_ranges(bad, 40, "'w'")
    assert check_ranges([(0, 1), (1, 40)], 40, "'w'") == ((0, 1), (1, 40))
