"""The exceptions pos_geometry raises.

Every error the package raises on purpose is a :class:`PosGeometryError`. Each
message states the rule that was broken, the value that was received, and what
to do about it. Subclasses also inherit from the matching built-in exception
(``ValueError``, ``KeyError``, ``FileNotFoundError``...) so that generic
``except`` clauses keep working.
"""

from __future__ import annotations

__all__ = [
    "PosGeometryError",
    "UnknownModelError",
    "CheckpointFormatError",
    "MissingTensorError",
    "NonFiniteError",
    "NotCachedError",
    "RevisionNotFoundError",
    "UnsafeCheckpointError",
    "NoLearnedTableError",
    "InvalidArgumentError",
    "DeviceMismatchError",
    "ExportError",
    "RemoteError",
    "AccessDeniedError",
    "NotApplicableError",
]


class PosGeometryError(Exception):
    """Base class of every error raised by pos_geometry."""


class UnknownModelError(PosGeometryError, LookupError):
    """A model name is neither in the model table nor a usable path or repo id.

    ``suggestions`` holds the closest known names, best first.
    """

    def __init__(self, message: str, *, name: str = "", suggestions: tuple[str, ...] = ()):
        super().__init__(message)
        self.name = name
        self.suggestions = tuple(suggestions)

    def __str__(self) -> str:  # LookupError would otherwise quote the message like a key
        return self.args[0] if self.args else ""


class CheckpointFormatError(PosGeometryError, ValueError):
    """A file is not a checkpoint we can read, or it is truncated or corrupted."""


class MissingTensorError(PosGeometryError, LookupError):
    """A checkpoint holds no positional-embedding tensor. ``keys`` lists what it has."""

    def __init__(self, message: str, *, keys: tuple[str, ...] = ()):
        super().__init__(message)
        self.keys = tuple(keys)

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class NonFiniteError(PosGeometryError, ValueError):
    """The table contains NaN or infinite values."""


class NotCachedError(PosGeometryError, FileNotFoundError):
    """Offline mode was requested and the files are not in any local cache."""


class RevisionNotFoundError(PosGeometryError, LookupError):
    """The requested revision (branch, tag, commit or checkpoint) does not exist."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class UnsafeCheckpointError(CheckpointFormatError):
    """A pickle inside a checkpoint asked to import or call something outside tensor storage.

    It is refused, never executed.
    """


class NoLearnedTableError(PosGeometryError, ValueError):
    """The model has no learned positional matrix (it uses rotary embeddings, say)."""


class InvalidArgumentError(PosGeometryError, ValueError):
    """An argument is out of range or of the wrong shape or type."""


class DeviceMismatchError(PosGeometryError, ValueError):
    """Inputs live on different devices; pos_geometry never copies them silently."""


class ExportError(PosGeometryError, RuntimeError):
    """A figure could not be written (for example, no browser for static export)."""


class RemoteError(PosGeometryError, ConnectionError):
    """A server did not answer as the protocol promises, or not in time.

    An HTTP 5xx or 429, a body that is not what was asked for (not JSON, bad compression, short,
    dropped), a redirect loop, a file that changed while it was read, or the load's overall
    deadline passed. The message names the URL. Nothing is cached from a failed read.
    """


class AccessDeniedError(PosGeometryError, PermissionError):
    """The repository exists but this user may not read it (gated, or private without a token)."""


class NotApplicableError(PosGeometryError, ValueError):
    """The analysis does not apply to this model (a rotary atlas of a model without rotary embeddings, say)."""
