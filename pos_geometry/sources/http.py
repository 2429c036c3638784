"""A :class:`~pos_geometry.sources.byte_source.ByteSource` over HTTP ``Range`` requests.

:class:`HttpByteSource` lets the checkpoint parsers (safetensors header, PyTorch zip
central directory) run on a remote file while transferring only the bytes they ask
for. Requests go through ``huggingface_hub.get_session()`` (the shared ``httpx2``
client, which honours ``HF_HUB_OFFLINE`` and follows redirects) with the headers
``huggingface_hub.utils.build_hf_headers()`` builds (user agent, and the saved token
when the URL is on the Hub).

Every answer is checked: a ranged ``GET`` must come back ``206 Partial Content``
with a ``Content-Range`` naming exactly the bytes asked for. A server that ignores
``Range`` and starts sending the whole file with ``200 OK`` is cut off before its
body is read, and :class:`~pos_geometry.errors.CheckpointFormatError` says so.
HTTP errors are raised as huggingface_hub's own typed errors (``hf_raise_for_status``)
so that :mod:`pos_geometry.sources.hub` can turn them into pos_geometry errors
that name the repository and revision.

Every request after the first is pinned to the same version of the file: the first
answer's ``ETag`` is remembered, later requests carry it in ``If-Match`` (when it is a
strong tag), and an answer with another ``ETag``, or ``412 Precondition Failed``, raises
:class:`~pos_geometry.errors.RemoteError`, so bytes of two versions are never mixed.
Transport failures (a dropped connection, a redirect loop, a body that does not decode)
and the overall deadline of :mod:`pos_geometry.sources._deadline` also raise
:class:`~pos_geometry.errors.RemoteError`, naming the URL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from huggingface_hub import constants, get_hf_file_metadata
from huggingface_hub.utils import hf_raise_for_status

from pos_geometry.errors import CheckpointFormatError, RemoteError
from pos_geometry.sources._deadline import bounded, remaining
from pos_geometry.sources.http_transport import (
    CONTENT_RANGE,
    VALIDATORS,
    TransferCount,
    count_transfers,
    counted,
    hub_headers,
    open_stream,
    transport_errors,
    validators_of,
)
from pos_geometry.sources.reread import verify_in_one_answer

__all__ = [
    "DEFAULT_READAHEAD",
    "HttpByteSource",
    "TransferCount",
    "count_transfers",
    "open_stream",
    "hub_headers",
    "transport_errors",
]

DEFAULT_READAHEAD = 64 * 1024
"""Reads shorter than this fetch this many bytes around them."""
_MAX_WINDOWS = 4  # read-ahead windows kept (a zip's head and tail, a header, a record start)


@dataclass
class HttpByteSource:
    """Random access to a remote file by HTTP ``Range`` requests.

    Args:
        url: the file's URL (for a Hub file, ``huggingface_hub.hf_hub_url(repo, filename, revision=commit)``,
            or the ``location`` of its ``get_hf_file_metadata``).
        name: used in error messages (default: the URL).
        size: the file size in bytes; when 0 it is fetched with one ``HEAD`` request
            (``huggingface_hub.get_hf_file_metadata``).
        headers: extra request headers; the default is ``build_hf_headers()``, which carries the saved
            Hugging Face token. The token is only sent to the Hub endpoint's own origin.
        readahead: a read shorter than this fetches a window of ``readahead`` bytes around it (forward,
            or backward when the read is near the end of the file, as for a zip's central directory)
            and keeps it, so the small header reads of a parser cost one request. Reads at least this
            long fetch exactly the bytes asked for. The last few windows are kept, so a parser
            that returns to the start of the file after reading its end costs no extra request.
        timeout: seconds to wait for the server (``None`` = huggingface_hub's download timeout).

    ``bytes_read`` counts the body bytes received (read-ahead included); ``requests`` counts the
    ranged ``GET`` requests made; ``etag`` is the version every answer must carry (the first
    answer's ``ETag`` unless given).
    """

    url: str
    name: str = ""
    size: int = 0
    headers: dict[str, str] | None = None
    readahead: int = DEFAULT_READAHEAD
    timeout: float | None = None
    etag: str | None = None
    bytes_read: int = field(default=0)
    requests: int = field(default=0)
    validators: dict[str, str] = field(default_factory=dict)
    _windows: list[tuple[int, bytes]] = field(default_factory=list, repr=False)
    _served: list[tuple[int, int, str]] = field(default_factory=list, repr=False)
    _seen: bool = field(default=False, repr=False)
    _pinned_first: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self.name = self.name or self.url
        if self.headers is None:
            self.headers = hub_headers(self.url)
        if self.timeout is None:
            self.timeout = float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
        if self.size <= 0:
            with transport_errors(self.url):
                meta = bounded(
                    lambda: get_hf_file_metadata(
                        self.url, headers=self.headers, timeout=remaining(self.url, self.timeout)
                    ),
                    self.url,
                )
            if meta.size is None:
                raise CheckpointFormatError(
                    f"{self.name!r}: the server did not report the file size (no Content-Length on HEAD), "
                    "so it cannot be read by byte ranges. Download the file and read it locally instead."
                )
            self.size = int(meta.size)

    @classmethod
    def open_first(
        cls, url: str, length: int, *, name: str = "", timeout: float | None = None
    ) -> HttpByteSource:
        """Open ``url`` with one ranged ``GET`` of its first ``length`` bytes instead of a ``HEAD``.

        The file's size comes from the answer's ``Content-Range`` (``bytes 0-L/SIZE``), its version
        from its ``ETag`` and its location from the URL the redirects ended at (a Hub weight file
        answers ``302`` to its CDN), so later reads go straight there. The bytes are kept as the
        first read-ahead window: a parser reading a header that fits costs no further request.
        A file shorter than ``length`` is returned whole (the server clips the range, RFC 9110).
        """
        if length < 1:
            raise CheckpointFormatError(f"open_first needs length >= 1; got {length}.")
        headers: dict[str, Any] = {
            **hub_headers(url),
            "Range": f"bytes=0-{length - 1}",
            "Accept-Encoding": "identity",
        }
        label = name or url
        timeout = float(constants.HF_HUB_DOWNLOAD_TIMEOUT) if timeout is None else timeout
        with (
            transport_errors(url),
            open_stream(url, headers, remaining(url, timeout)) as response,
        ):
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            header = response.headers.get("Content-Range")
            match = CONTENT_RANGE.match(header or "")
            if response.status_code != 206 or match is None or match[3] == "*" or int(match[1]) != 0:
                raise CheckpointFormatError(
                    f"{label!r}: expected 206 Partial Content with a Content-Range 'bytes 0-N/SIZE' for the "
                    f"first {length} bytes, got {response.status_code} with Content-Range {header!r}; the "
                    "transfer was stopped. pos_geometry reads only the bytes it needs, so it requires a server "
                    "that honours Range requests (the Hugging Face Hub does). Check HF_ENDPOINT and any proxy."
                )
            last, size = int(match[2]), int(match[3])
            if last != min(length, size) - 1:
                raise CheckpointFormatError(
                    f"{label!r}: asked for bytes 0-{length - 1} of a {size}-byte file, the server answered "
                    f"bytes 0-{last}; refusing bytes at the wrong offset."
                )
            data = bytearray()
            for chunk in response.iter_bytes():
                remaining(url)
                data += chunk
                if len(data) > last + 1:
                    raise CheckpointFormatError(
                        f"{label!r}: the server sent more than the {last + 1} bytes asked for; the transfer "
                        "was stopped."
                    )
            final_url, etag = str(response.url), response.headers.get("ETag")
            validators = validators_of(response.headers)
        if len(data) != last + 1:
            raise CheckpointFormatError(
                f"{label!r}: the connection ended after {len(data)} of the {last + 1} bytes asked for (bytes "
                f"0-{last}). Retry; if it persists, check the network or proxy."
            )
        src = cls(final_url, name=label, size=size, timeout=timeout, etag=etag, validators=validators)
        src._windows = [(0, bytes(data))]
        src._served = [(0, len(data), hashlib.sha256(data).hexdigest())]
        src._seen, src._pinned_first = True, bool(validators)
        src.bytes_read, src.requests = len(data), 1
        counted(len(data), 1)
        return src

    # -- ByteSource -------------------------------------------------------------------------------
    def read(self, offset: int, length: int) -> bytes:
        """Return ``length`` bytes at ``offset``, fetching only what the read-ahead window lacks."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CheckpointFormatError(
                f"{self.name!r} is truncated or corrupted: a read of {length} bytes at offset {offset} "
                f"goes past its end ({self.size} bytes)."
            )
        end = offset + length
        parts: list[bytes] = []
        pos = offset
        while pos < end:
            window = next(((ws, w) for ws, w in self._windows if ws <= pos < ws + len(w)), None)
            if window is not None:
                ws, w = window
                take = min(end, ws + len(w)) - pos
                parts.append(w[pos - ws : pos - ws + take])
                pos += take
                continue
            need = end - pos
            if need >= self.readahead:
                parts.append(self._fetch(pos, need))
                break
            f_end = min(self.size, pos + self.readahead)
            f_start = max(0, min(pos, f_end - self.readahead))
            data = self._fetch(f_start, f_end - f_start)
            self._windows = [*self._windows[-(_MAX_WINDOWS - 1) :], (f_start, data)]
            parts.append(data[pos - f_start : pos - f_start + need])
            pos = end
        return b"".join(parts)

    # -- one ranged GET ---------------------------------------------------------------------------
    def _fetch(self, start: int, length: int) -> bytes:
        """``GET`` bytes ``[start, start + length)``; validates status, Content-Range and body length."""
        if length == 0:
            return b""
        self.requests += 1
        counted(0, 1)
        with transport_errors(self.url):
            return self._stream(start, length, self._range_headers(start, length))

    def _range_headers(self, start: int, length: int) -> dict[str, Any]:
        headers: dict[str, Any] = {
            **(self.headers or {}),
            "Range": f"bytes={start}-{start + length - 1}",
            "Accept-Encoding": "identity",
        }
        if self.etag and not self.etag.startswith("W/"):
            headers["If-Match"] = self.etag
        return headers

    def stream_to(self, offset: int, length: int, sink: Callable[[memoryview], object]) -> None:
        """``GET`` bytes ``[offset, offset + length)`` in ONE ranged request and hand each body chunk to
        ``sink`` as it arrives, in order (no joined copy: a caller writes them on, e.g. to a file).

        Every check of :meth:`read` applies (status, ``Content-Range``, pinned ``ETag``/``If-Match``,
        the body's exact length, the overall deadline); on a failure ``sink`` may have seen a prefix
        of the bytes, so a caller writing a file must discard it (as the atomic cache writer does).
        """
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CheckpointFormatError(
                f"{self.name!r} is truncated or corrupted: a read of {length} bytes at offset {offset} "
                f"goes past its end ({self.size} bytes)."
            )
        if length == 0:
            return
        self.requests += 1
        counted(0, 1)
        with transport_errors(self.url):
            for chunk in self._chunks(offset, length, self._range_headers(offset, length)):
                sink(memoryview(chunk))

    def _stream(self, start: int, length: int, headers: dict[str, Any]) -> bytes:
        return b"".join(self._chunks(start, length, headers))

    def _chunks(self, start: int, length: int, headers: dict[str, Any]) -> Iterator[bytes]:
        """The body chunks of one ranged ``GET`` of bytes ``[start, start + length)``, validated."""
        last = start + length - 1
        timeout = remaining(self.url, self.timeout)
        received = 0
        with open_stream(self.url, headers, timeout) as response:
            if response.status_code == 200:
                # The server ignored Range and is sending the whole file: leave without reading the body
                # (closing the stream drops the connection).
                raise CheckpointFormatError(
                    f"{self.name!r}: the server ignored the HTTP Range request for bytes {start}-{last} and "
                    f"answered 200 OK with the whole file ({response.headers.get('Content-Length', 'unknown')} "
                    "bytes); the transfer was stopped before its body was read. pos_geometry reads only the "
                    "bytes it needs, so it requires a server that honours Range requests (the Hugging Face "
                    "Hub does). Check HF_ENDPOINT and any proxy in between, or download the file and load "
                    "it with read_local()."
                )
            if response.status_code == 412:
                raise self._changed(f"answered 412 Precondition Failed to If-Match: {self.etag}")
            if response.status_code == 416:
                raise CheckpointFormatError(
                    f"{self.name!r}: the server refused the range bytes {start}-{last} (416); the remote "
                    f"file is not the {self.size} bytes it was announced to be. It may have changed: retry."
                )
            if response.status_code >= 400:
                response.read()
                hf_raise_for_status(response)
            if response.status_code != 206:
                raise CheckpointFormatError(
                    f"{self.name!r}: expected 206 Partial Content for bytes {start}-{last}, got "
                    f"{response.status_code}. Check HF_ENDPOINT and any proxy in between."
                )
            self._check_content_range(response.headers.get("Content-Range"), start, last)
            self._check_version(response.headers)
            digest = hashlib.sha256()
            for chunk in response.iter_bytes():
                digest.update(chunk)
                remaining(self.url)  # the overall deadline, checked as the body trickles in
                received += len(chunk)
                if received > length:
                    raise CheckpointFormatError(
                        f"{self.name!r}: the server sent more than the {length} bytes asked for "
                        f"(bytes {start}-{last}); the transfer was stopped."
                    )
                self.bytes_read += len(chunk)
                counted(len(chunk), 0)
                yield chunk
        if received != length:
            raise CheckpointFormatError(
                f"{self.name!r}: the connection ended after {received} of the {length} bytes asked for "
                f"(bytes {start}-{last}). Retry; if it persists, check the network or proxy."
            )
        self._served.append((start, length, digest.hexdigest()))

    @property
    def pinned(self) -> bool:
        """Whether the file's version is pinned by a validator the server sent (ETag, Last-Modified,
        X-Repo-Commit, X-Linked-Etag). Without one, a swap between two range requests is only caught by
        :meth:`verify`."""
        return self._pinned_first

    def _check_version(self, headers: Any) -> None:
        """Pin the file's version: every version header (:data:`VALIDATORS`) an answer carried must come back
        unchanged in every later answer; a header dropped after it was sent, or another value, is a change.
        The ETag also goes out as ``If-Match``. A header first seen in a later answer is pinned from then on
        (the earlier bytes are not covered by it: :attr:`pinned` says whether the first answer was)."""
        if not self._seen:
            self.validators, self._seen = validators_of(headers), True
            self._pinned_first = bool(self.validators)
        for name in VALIDATORS:
            now, first = headers.get(name), self.validators.get(name)
            if name == "ETag" and first is None:
                first = self.etag  # given by the caller (the ETag a HEAD returned)
            if first is None:
                if now is not None:
                    self.validators[name] = now
                continue
            if now is None:
                raise self._changed(f"dropped its {name} header (first answer: {first[:80]!r})")
            if now.removeprefix("W/") != first.removeprefix("W/"):
                raise self._changed(f"answered with {name} {now[:80]!r} instead of {first[:80]!r}")
        self.etag = self.etag or self.validators.get("ETag")

    def verify(self) -> None:
        """Read the ranges served so far again, in one answer, and compare: the check for a server that gives
        no validator to pin (:mod:`pos_geometry.sources.reread`). Raises :class:`RemoteError` when they came
        from more than one version; costs one request for their span."""
        served, self._served = list(self._served), []
        try:
            verify_in_one_answer(self, served)
        finally:
            self._served = served

    def _changed(self, what: str) -> RemoteError:
        return RemoteError(
            f"{self.name!r} changed on the server while being read: {self.url} {what}. Bytes of two "
            "versions are never mixed, and nothing was cached. Retry; if it persists, the server (or a "
            "proxy) is serving inconsistent files."
        )

    def _check_content_range(self, header: str | None, start: int, last: int) -> None:
        match = CONTENT_RANGE.match(header or "")
        if match is None:
            raise CheckpointFormatError(
                f"{self.name!r}: a 206 answer for bytes {start}-{last} carried no valid Content-Range "
                f"header (got {header!r}); the bytes cannot be trusted. Check HF_ENDPOINT and any proxy."
            )
        first, final, total = int(match[1]), int(match[2]), match[3]
        if (first, final) != (start, last):
            raise CheckpointFormatError(
                f"{self.name!r}: asked for bytes {start}-{last}, the server answered bytes {first}-{final} "
                f"(Content-Range {header!r}); refusing bytes at the wrong offset."
            )
        if total != "*" and int(total) != self.size:
            raise CheckpointFormatError(
                f"{self.name!r}: the file is now {total} bytes, not the {self.size} announced when it was "
                "opened; it changed on the server while being read. Retry."
            )
