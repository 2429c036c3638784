"""One offline policy for every command: when the network is off limits, why, and how to fetch instead.

The network is not used when ``offline=True`` is passed, when ``HF_HUB_OFFLINE`` or
``POS_GEOMETRY_OFFLINE`` is set, or (``offline=None``, the default) when the hub's host cannot be
reached. Reachability is probed once per endpoint and process (a failure is probed again after 30 s): one
TCP connection with a short timeout,
so a machine without network answers at once instead of after a client's retries (transformers spends
about 25 s retrying ``config.json``). A configured proxy skips the probe: the request itself decides.
``offline=False`` asks for the network even when the probe failed.

Every "not here" error ends with one :func:`fetch_hint`.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

__all__ = [
    "PROBE_TIMEOUT",
    "UNREACHABLE_FOR",
    "fetch_hint",
    "hub_reachable",
    "needs_weights",
    "offline_reason",
]

F = TypeVar("F", bound=Callable[..., Any])

PROBE_TIMEOUT = 2.0
"""Seconds the reachability probe waits for a TCP connection."""
UNREACHABLE_FOR = 30.0
"""Seconds a failed probe stands for its host before the next call probes again (a Jupyter session started
while the network was down goes online when it comes back; a server that reuses a port a failed probe saw
is not taken for that dead one)."""

_TRUE = {"1", "on", "yes", "true"}
_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
_PROBED: dict[tuple[str, int], tuple[bool, float]] = {}  # (reachable, when probed)


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def _address(endpoint: str) -> tuple[str, int] | None:
    parts = urlsplit(endpoint)
    if not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def hub_reachable(endpoint: str | None = None) -> bool:
    """Whether a TCP connection to the hub's host (``HF_ENDPOINT``) opens within :data:`PROBE_TIMEOUT`;
    probed once per host and port in a process (a failure again after :data:`UNREACHABLE_FOR` seconds).
    True when a proxy is configured (not probed)."""
    if any(os.environ.get(p) for p in _PROXIES):
        return True
    address = _address(endpoint or _endpoint())
    if address is None:
        return True  # not a URL this probe understands: let the request itself fail with its own error
    known = _PROBED.get(address)
    if known is None or (not known[0] and time.monotonic() - known[1] > UNREACHABLE_FOR):
        try:
            socket.create_connection(address, timeout=PROBE_TIMEOUT).close()
            known = (True, time.monotonic())
        except OSError:
            known = (False, time.monotonic())
        _PROBED[address] = known
    return known[0]


def offline_reason(offline: bool | None = None) -> str | None:
    """None when the network may be used; else why not, as a sentence opening (``"Offline (HF_HUB_OFFLINE is
    set)"``, ``"Offline (no network: huggingface.co:443 could not be reached)"``)."""
    from huggingface_hub import constants

    if offline:
        return "Offline (offline=True was passed)"
    if os.environ.get("POS_GEOMETRY_OFFLINE", "").strip().lower() in _TRUE:
        return "Offline (POS_GEOMETRY_OFFLINE is set)"
    if constants.is_offline_mode():
        return "Offline (HF_HUB_OFFLINE is set)"
    if offline is None and not hub_reachable():
        host, port = _address(_endpoint()) or ("the hub", 0)
        return f"Offline (no network: {host}:{port} could not be reached)"
    return None


def fetch_hint(repo_id: str, files: str = "", revision: str | None = None) -> str:
    """How to get ``files`` of ``repo_id`` onto this machine: the one wording every error uses."""
    rev = f" --revision {revision}" if revision and revision != "main" else ""
    what = f" {files}" if files else ""
    return (
        f"To fetch it: run once with network access (with HF_HUB_OFFLINE and POS_GEOMETRY_OFFLINE unset), or "
        f"download beforehand with `hf download {repo_id}{what}{rev}`, or pass a local path."
    )


def needs_weights(what: str) -> Callable[[F], F]:
    """Decorate a function that reads model weights: a :class:`~pos_geometry.errors.NotCachedError` it raises
    opens with ``what`` (which weights are missing, and that the positional table alone is not enough)."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def inner(*args: Any, **kwargs: Any) -> Any:
            from pos_geometry.errors import NotCachedError

            try:
                return func(*args, **kwargs)
            except NotCachedError as exc:
                raise NotCachedError(f"{what} {exc}") from None

        return inner  # type: ignore[return-value]

    return wrap
