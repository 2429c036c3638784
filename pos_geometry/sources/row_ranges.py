"""Row ranges of one stored tensor, handed to a visitor in order through one reused buffer.

A tensor stored contiguously (a safetensors entry, a cache file) is ``n_rows`` rows of
``row_bytes`` bytes from ``offset`` on. :func:`visit_ranges` gives the bytes of each requested
row range ``[start, stop)`` to ``visit(i, view)`` in turn, reading nothing else:

* a source that can stream (:meth:`pos_geometry.sources.http.HttpByteSource.stream_to`) is read
  with ONE request from the first range's start to the last range's stop; the body chunks are
  copied into the buffer as they arrive (bytes between ranges are dropped) and each range is
  visited as soon as it is complete, so the visitor's work overlaps the transfer;
* any other source is read range by range at its offset (``readinto``: no intermediate copy).

Memory holds one range at a time, whatever the tensor's size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pos_geometry.errors import InvalidArgumentError, RemoteError
from pos_geometry.sources.byte_source import ByteSource, read_into

__all__ = ["check_ranges", "visit_ranges"]

Visit = Callable[[int, memoryview], object]


def check_ranges(ranges: Sequence[tuple[int, int]], n_rows: int, what: str) -> tuple[tuple[int, int], ...]:
    """``ranges`` as a tuple of ``(start, stop)`` ints, checked: non-empty, in increasing order, not
    overlapping, each within ``[0, n_rows)``.

    Raises:
        InvalidArgumentError: the rule broken, the ranges received and how to fix them.
    """
    out = tuple((int(a), int(b)) for a, b in ranges)
    previous = 0
    for start, stop in out:
        if not previous <= start < stop <= n_rows:
            raise InvalidArgumentError(
                f"row ranges of {what} must be non-empty, increasing and non-overlapping within its {n_rows} "
                f"rows; got {list(out)[:6]}{' ...' if len(out) > 6 else ''}. Sort and merge them first."
            )
        previous = stop
    return out


def visit_ranges(
    src: ByteSource,
    offset: int,
    row_bytes: int,
    ranges: tuple[tuple[int, int], ...],
    buffer: memoryview,
    visit: Visit,
) -> None:
    """Call ``visit(i, view)`` for each range ``i`` of ``ranges`` (checked by :func:`check_ranges`), in
    order; ``view`` is the first ``(stop - start) * row_bytes`` bytes of ``buffer`` (writable, byte
    addressed, at least as long as the longest range) holding those rows, valid only during the call.

    An exception raised by ``visit`` stops the transfer (a streaming request is closed unread).
    """
    if not ranges:
        return
    stream = getattr(src, "stream_to", None)
    if stream is None:
        for i, (start, stop) in enumerate(ranges):
            view = buffer[: (stop - start) * row_bytes]
            read_into(src, offset + start * row_bytes, view)
            visit(i, view)
        return
    first = ranges[0][0]
    bounds = [((start - first) * row_bytes, (stop - first) * row_bytes) for start, stop in ranges]
    at, done = 0, 0  # bytes of the span received so far; ranges visited so far

    def sink(chunk: memoryview) -> None:
        nonlocal at, done
        chunk = chunk.cast("B") if chunk.format != "B" else chunk
        while chunk.nbytes and done < len(bounds):
            lo, hi = bounds[done]
            if at < lo:  # rows between two ranges: dropped
                skip = min(lo - at, chunk.nbytes)
            else:
                skip = min(hi - at, chunk.nbytes)
                buffer[at - lo : at - lo + skip] = chunk[:skip]
            chunk, at = chunk[skip:], at + skip
            if at == hi:
                visit(done, buffer[: hi - lo])
                done += 1

    stream(offset + first * row_bytes, bounds[-1][1], sink)
    if done != len(bounds):  # the source checks the body's length; this only guards a broken source
        raise RemoteError(f"{src.name!r}: the transfer ended after {done} of {len(bounds)} row ranges.")
