"""The check for a remote file whose server sends no version validator: read it again in one answer.

Without an ``ETag``, ``Last-Modified`` or commit header nothing ties two range requests to one version of the
file, so the ranges a parser read may come from two versions (a hybrid table). Reading every range again and
comparing does not settle it: a server that changes the file between requests can give the second pass the
same mixture as the first (two versions in turn: the ranges read at odd and at even requests line up again).
What one answer holds is one version. So the ranges already served are read again as **one** ranged request,
from the first byte of the first range to the last byte of the last, and each range's digest is compared
with the digest of the same bytes in that answer: any difference, at any position, means the first pass
mixed versions (or the file changed between the passes), and the read is refused. A swap at any request
index, during the first pass or between the two, is caught; a server that changes the bytes inside one
answer is serving a corrupt file, which no client can tell from a real one.

The span is bounded by ``POS_GEOMETRY_MAX_VERIFY_BYTES`` (default 256 MiB): a table far from its header in a
large file cannot be checked this way, and the refusal says how to read it instead.
"""

from __future__ import annotations

import bisect
import hashlib
from typing import Any

from pos_geometry._limits import MAX_VERIFY_BYTES, limit
from pos_geometry.errors import RemoteError
from pos_geometry.sources.http_transport import counted, transport_errors

__all__ = ["check_one_version", "verify_in_one_answer"]


def verify_in_one_answer(src: Any, served: list[tuple[int, int, str]]) -> None:
    """Compare each served range ``(start, length, sha256)`` of ``src`` (an
    :class:`~pos_geometry.sources.http.HttpByteSource`) with the same bytes of one ranged
    answer covering them all; :class:`RemoteError` on the first difference, or when the span is over the
    limit. Costs one request of ``last byte - first byte + 1`` bytes."""
    ranges = sorted((start, length, digest) for start, length, digest in served if length > 0)
    if not ranges:
        return
    first = ranges[0][0]
    stop = max(start + length for start, length, _ in ranges)
    span, cap = stop - first, limit(MAX_VERIFY_BYTES)
    if span > cap:
        raise RemoteError(
            f"{src.name!r}: the server sends no ETag, Last-Modified or commit header, so the bytes read cannot be "
            f"tied to one version of the file without reading them again in one answer, and they span {span:,} "
            f"bytes, over the limit of {cap:,} set by {MAX_VERIFY_BYTES}. Raise the limit "
            f"({MAX_VERIFY_BYTES}=<bytes>), or download the file and load it locally."
        )
    starts = [start for start, _, _ in ranges]
    hashers = [hashlib.sha256() for _ in ranges]
    offset = first
    src.requests += 1
    counted(0, 1)
    with transport_errors(src.url):
        for chunk in src._chunks(first, span, src._range_headers(first, span)):
            end = offset + len(chunk)
            # the ranges that overlap [offset, end): those starting before `end` and not yet finished
            for i in range(bisect.bisect_left(starts, end)):
                start, length, _ = ranges[i]
                lo, hi = max(start, offset), min(start + length, end)
                if lo < hi:
                    hashers[i].update(chunk[lo - offset : hi - offset])
            offset = end
    for (start, length, digest), hasher in zip(ranges, hashers, strict=True):
        if hasher.hexdigest() != digest:
            raise src._changed(
                f"gave other bytes for {start}-{start + length - 1} than one answer for bytes {first}-{stop - 1} "
                "holds (no ETag, Last-Modified or commit header to pin its version; its ranges came from more "
                "than one version)"
            )


def check_one_version(src: Any) -> None:
    """For a remote source whose server sent no version validator (``pinned`` False), read everything served
    so far again in one answer (:func:`verify_in_one_answer`); nothing for a local or pinned source. Sources
    that wrap another (``PiecewiseReads``) are unwrapped."""
    inner = getattr(src, "src", src)
    if getattr(inner, "pinned", True) is False:
        inner.verify()
