"""The two Hub API answers pos_geometry reads itself: a model's listing at a revision, and its refs.

huggingface_hub's ``HfApi.model_info`` and ``list_repo_refs`` read a whole answer before parsing it, with
no bound on its size or nesting, and retry on their own (sleeping through ``Retry-After``, closing the
shared HTTP client when a retry cannot connect). These two requests go through pos_geometry's own
streamed ``GET`` instead (:func:`~pos_geometry.sources.http.open_stream`):

* the status line and headers arrive within the load's deadline, and the body is checked against the
  deadline chunk by chunk, in the caller's thread;
* the body is bounded by :data:`MAX_LISTING_BYTES` after decompression, so an endless or gzip-bombed
  listing stops at the cap instead of filling memory;
* the JSON is parsed with deep nesting refused as a typed error, never a ``RecursionError``;
* an error the Hub signals (gated, no such repo or revision, 5xx) comes out as huggingface_hub's own
  exception type, which :func:`pos_geometry.sources.hub_errors.hub_errors` turns into pos_geometry's.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx2
from huggingface_hub import constants
from huggingface_hub.utils import hf_raise_for_status

from pos_geometry.errors import RemoteError
from pos_geometry.sources._deadline import remaining
from pos_geometry.sources.http import hub_headers, open_stream

__all__ = ["MAX_ERROR_BYTES", "MAX_LISTING_BYTES", "get_json", "model_listing", "refs"]

MAX_LISTING_BYTES = 32 * 2**20
"""Largest API answer read (decompressed): a listing of 100,000 files is about 6 MB."""
MAX_ERROR_BYTES = 64 * 2**10
"""Largest error body read to name the error; a longer one is cut there."""
API_TIMEOUT = 10.0
"""Per-read timeout of an API request, seconds (capped by the load's deadline)."""


def _bounded_body(response: httpx2.Response, url: str, cap: int, *, cut: bool = False) -> bytes:
    data = bytearray()
    for chunk in response.iter_bytes():  # decoded: a gzip bomb is counted as it inflates
        remaining(url)
        data += chunk
        if len(data) > cap:
            if cut:
                return bytes(data[:cap])
            raise RemoteError(
                f"{url} sent more than {cap:,} bytes for an API answer (a listing of 100,000 files is about "
                "6 MB); the transfer was stopped. HF_ENDPOINT does not behave like a Hugging Face Hub: check it."
            )
    return bytes(data)


def get_json(url: str) -> Any:
    """The JSON answer of a ``GET`` of ``url``, bounded in time, size and nesting (see module docstring).

    Raises:
        RemoteError: too large, too deep, or the deadline. ValueError: not JSON.
        huggingface_hub errors (an HTTP error status) and httpx2 errors (a failed transfer) pass through
        to the caller, which maps them (:func:`pos_geometry.sources.hub_errors.hub_errors`).
    """
    with open_stream(url, hub_headers(url), remaining(url, API_TIMEOUT)) as response:
        if response.status_code >= 400:
            body = _bounded_body(response, url, MAX_ERROR_BYTES, cut=True)
            kept = {
                k: v
                for k, v in response.headers.items()
                if k.lower() not in ("content-encoding", "content-length")
            }
            hf_raise_for_status(
                httpx2.Response(response.status_code, headers=kept, content=body, request=response.request)
            )
        body = _bounded_body(response, url, MAX_LISTING_BYTES)
    try:
        return json.loads(body)
    except RecursionError:
        raise RemoteError(
            f"{url} did not answer with a usable listing (its JSON is nested too deeply); HF_ENDPOINT does not "
            "look like a Hugging Face Hub, or a proxy altered the answer. Check it."
        ) from None


def model_listing(repo_id: str, revision: str) -> tuple[str, tuple[str, ...]]:
    """``(sha, filenames)`` of ``repo_id`` at ``revision`` (the ``model_info`` endpoint).

    Raises:
        RemoteError: the answer is not a model listing (the message names the URL and what was wrong).
    """
    url = f"{constants.ENDPOINT}/api/models/{repo_id}/revision/{quote(revision, safe='')}"
    try:
        data = get_json(url)
        sha = data["sha"]
        files = tuple(str(s["rfilename"]) for s in (data.get("siblings") or ()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSONDecodeError is a ValueError
        raise RemoteError(
            f"{url} did not answer with a model listing ({type(exc).__name__}: {str(exc)[:120]}); "
            "HF_ENDPOINT does not look like a Hugging Face Hub, or a proxy altered the answer. Check it."
        ) from None
    return sha if isinstance(sha, str) else repr(sha), files


def refs(repo_id: str) -> dict[str, str]:
    """``{branch or tag: commit}`` of ``repo_id`` (the ``refs`` endpoint); entries without a commit are left out.

    Raises:
        RemoteError: the answer is not a refs listing.
    """
    url = f"{constants.ENDPOINT}/api/models/{repo_id}/refs"
    try:
        data = get_json(url)
        entries = [*(data.get("branches") or ()), *(data.get("tags") or ())]
        return {str(e["name"]): str(e["targetCommit"]) for e in entries if e.get("targetCommit")}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RemoteError(
            f"{url} did not answer with a list of branches and tags ({type(exc).__name__}: {str(exc)[:120]}); "
            "HF_ENDPOINT does not look like a Hugging Face Hub. Check it."
        ) from None
