"""HTTP plumbing under :class:`~pos_geometry.sources.http.HttpByteSource`: the request headers (the token only
for the Hub's own origin), a streamed GET whose headers arrive within the load's deadline, transport failures
as :class:`~pos_geometry.errors.RemoteError`, the version headers that pin a file, and the transfer counter.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
from huggingface_hub import constants
from huggingface_hub import errors as hf_errors
from huggingface_hub.utils import build_hf_headers, get_session

from pos_geometry.errors import RemoteError
from pos_geometry.sources._deadline import bounded

__all__ = [
    "TransferCount",
    "count_transfers",
    "counted",
    "hub_headers",
    "open_stream",
    "transport_errors",
    "VALIDATORS",
    "validators_of",
    "CONTENT_RANGE",
]


VALIDATORS = ("ETag", "Last-Modified", "X-Repo-Commit", "X-Linked-Etag")
"""Response headers that name a file's version; those of the first answer pin every later one."""


def validators_of(headers: Any) -> dict[str, str]:
    return {name: str(headers[name]) for name in VALIDATORS if headers.get(name)}


@contextlib.contextmanager
def transport_errors(url: str) -> Iterator[None]:
    """Turn httpx transport failures (a dropped connection, a timeout, a redirect loop, a body that
    does not decode) into :class:`RemoteError` naming ``url``. HTTP status errors pass through."""
    try:
        yield
    except (httpx2.HTTPStatusError, hf_errors.HfHubHTTPError):
        raise
    except httpx2.HTTPError as exc:
        target = str(getattr(getattr(exc, "_request", None), "url", None) or url)[:300]
        raise RemoteError(
            f"the request to {target} failed ({type(exc).__name__}: {str(exc)[:200]}). Retry; if it "
            "persists, check the network, HF_ENDPOINT and any proxy in between."
        ) from None


@dataclass
class TransferCount:
    """Body bytes received and ranged ``GET`` requests made by every :class:`HttpByteSource` in a
    :func:`count_transfers` block (read-ahead included)."""

    bytes_read: int = 0
    requests: int = 0


_COUNT: ContextVar[TransferCount | None] = ContextVar("pos_geometry_transfer_count", default=None)


@contextlib.contextmanager
def count_transfers() -> Iterator[TransferCount]:
    """Count the range-read traffic of the code inside (this thread/context only; blocks nest)."""
    outer = _COUNT.get()
    count = TransferCount()
    token = _COUNT.set(count)
    try:
        yield count
    finally:
        _COUNT.reset(token)
        if outer is not None:
            outer.bytes_read += count.bytes_read
            outer.requests += count.requests


def counted(n_bytes: int, n_requests: int) -> None:
    count = _COUNT.get()
    if count is not None:
        count.bytes_read += n_bytes
        count.requests += n_requests


CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


def hub_headers(url: str) -> dict[str, str]:
    """huggingface_hub's request headers for ``url``: the saved token only when ``url`` has the origin
    (scheme, host, port) of ``HF_ENDPOINT``, never for another host (a CDN, a redirect target)."""
    same_hub = _origin(url) == _origin(constants.ENDPOINT)
    return build_hf_headers(token=None if same_hub else False)


@contextlib.contextmanager
def open_stream(url: str, headers: dict[str, Any], timeout: float | None) -> Iterator[Any]:
    """A streamed ``GET`` of ``url`` whose status line and headers arrive within the load's deadline.

    The per-read ``timeout`` does not stop a server that trickles its headers a byte at a time, so the
    request is sent through :func:`~pos_geometry.sources._deadline.bounded`; the body is then read by the
    caller, which checks the deadline chunk by chunk. The response is closed on the way out.
    """
    session = get_session()
    request = session.build_request("GET", url, headers=headers, timeout=timeout)
    response = bounded(lambda: session.send(request, stream=True), url, discard=lambda r: r.close())
    try:
        yield response
    finally:
        response.close()
