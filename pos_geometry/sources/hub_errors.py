"""Hub failures as pos_geometry errors that name the repository, the revision and the fix.

:func:`hub_errors` wraps a hub call: huggingface_hub's typed errors (repository or revision not found, gated,
offline with nothing cached, HTTP status errors) become :class:`~pos_geometry.errors.PosGeometryError`
subclasses whose message says what was asked for and how to get it (``hf download …``, another revision).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx2
from huggingface_hub import constants
from huggingface_hub import errors as hf_errors

from pos_geometry.errors import (
    AccessDeniedError,
    CheckpointFormatError,
    NotCachedError,
    PosGeometryError,
    RemoteError,
    RevisionNotFoundError,
    UnknownModelError,
)
from pos_geometry.sources import hub_api
from pos_geometry.sources.network import fetch_hint

__all__ = ["hub_errors", "repo_at", "download_hint", "listing"]
_MAX_LISTED = 20


def repo_at(repo_id: str, revision: str | None) -> str:
    return f"{repo_id!r} at revision {revision or 'main'!r}"


def download_hint(repo_id: str, revision: str | None, files: str = "config.json model.safetensors") -> str:
    return fetch_hint(repo_id, files, revision) + " (Use pytorch_model.bin for repos without safetensors.)"


def listing(names: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(names[:_MAX_LISTED])
    return shown + (f", ... ({len(names) - _MAX_LISTED} more)" if len(names) > _MAX_LISTED else "")


def _known_revisions(repo_id: str) -> str:
    """The repo's branches and tags, from one API call (best effort; '' when unknown)."""
    try:
        names = sorted(hub_api.refs(repo_id))
    except (PosGeometryError, hf_errors.HfHubHTTPError, httpx2.HTTPError, OSError, ValueError, KeyError):
        return ""
    return f" It has {len(names)} branches/tags: {listing(names)}." if names else ""


@contextlib.contextmanager
def hub_errors(repo_id: str, revision: str | None, what: str = "") -> Iterator[None]:
    """Turn huggingface_hub / httpx2 errors raised inside into pos_geometry errors."""
    where = repo_at(repo_id, revision)
    item = f" ({what})" if what else ""
    try:
        yield
    except hf_errors.HFValidationError as exc:
        raise UnknownModelError(
            f"{repo_id!r} is not a valid Hugging Face repo id ({exc}). Use 'org/name' as on huggingface.co, "
            "or a model-table name, or a local path.",
            name=repo_id,
        ) from None
    except hf_errors.GatedRepoError:
        raise AccessDeniedError(
            f"{repo_id!r} exists on {constants.ENDPOINT} but is gated: accept its terms on the model page and "
            "log in (`hf auth login` or HF_TOKEN), then retry."
        ) from None
    except hf_errors.RepositoryNotFoundError:
        raise UnknownModelError(
            f"No model repository {repo_id!r} on {constants.ENDPOINT} (or it is private and no valid token was "
            "sent). Check the spelling ('org/name'); for a private repo log in with `hf auth login` or set HF_TOKEN.",
            name=repo_id,
        ) from None
    except hf_errors.RevisionNotFoundError:
        raise RevisionNotFoundError(
            f"{repo_id!r} has no revision {revision!r} on {constants.ENDPOINT}.{_known_revisions(repo_id)} "
            "Pass an existing branch, tag or commit hash as revision= (e.g. 'main', 'checkpoint-400', 'step1000')."
        ) from None
    except hf_errors.RemoteEntryNotFoundError:
        raise CheckpointFormatError(
            f"{where} has no file{item}; the repo listing and its files disagree or the file was removed. "
            "Retry, or pass another revision."
        ) from None
    except (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled):
        raise NotCachedError(
            f"{where}{item} is not in the local caches and the Hub cannot be reached (offline mode or no "
            f"connection). {download_hint(repo_id, revision)}"
        ) from None
    except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
        raise NotCachedError(
            f"Could not reach {constants.ENDPOINT} for {where}{item} ({type(exc).__name__}: {str(exc)[:200]}) and "
            "it is not cached. Check the connection and HF_ENDPOINT, then retry. "
            + download_hint(repo_id, revision)
        ) from None
    except hf_errors.HfHubHTTPError as exc:
        raise _http_error(exc, where + item) from None
    except (httpx2.HTTPError, hf_errors.FileMetadataError) as exc:
        url = getattr(getattr(exc, "_request", None), "url", None) or constants.ENDPOINT
        raise RemoteError(
            f"the request to {str(url)[:300]} for {where}{item} failed ({type(exc).__name__}: {str(exc)[:200]}). "
            "Retry; if it persists, check HF_ENDPOINT and any proxy in between."
        ) from None


def _http_error(exc: hf_errors.HfHubHTTPError, what: str) -> PosGeometryError:
    """An HTTP error status as a pos_geometry error naming the URL: 401/403 are access problems,
    everything else (5xx, 429, an unexpected 4xx) is the server's answer, not a cache miss."""
    response = exc.response
    status = response.status_code if response is not None else 0
    url = str(response.request.url)[:300] if response is not None else constants.ENDPOINT
    if status in (401, 403):
        return AccessDeniedError(
            f"{url} answered HTTP {status} for {what}: this user may not read it. If the repo is private or "
            "gated, log in (`hf auth login` or HF_TOKEN) with an account that has access."
        )
    hint = "The server is busy: wait and retry." if status in (429, 503) else "Retry later."
    return RemoteError(f"{url} answered HTTP {status} for {what}: {str(exc).splitlines()[0][:200]}. {hint}")
