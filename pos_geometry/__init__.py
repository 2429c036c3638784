"""pos_geometry: the geometry of positional embeddings in pretrained transformers."""

from pos_geometry._version import __version__
from pos_geometry.embedding import PositionalEmbedding, Provenance, TokenEmbedding
from pos_geometry.errors import (
    CheckpointFormatError,
    DeviceMismatchError,
    ExportError,
    InvalidArgumentError,
    MissingTensorError,
    NoLearnedTableError,
    NonFiniteError,
    NotCachedError,
    PosGeometryError,
    RevisionNotFoundError,
    UnknownModelError,
    UnsafeCheckpointError,
)

__all__ = [
    "__version__",
    "PositionalEmbedding",
    "Provenance",
    "TokenEmbedding",
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
]
