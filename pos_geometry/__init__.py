"""pos_geometry: the geometry of positional embeddings in pretrained transformers.

The data flow, and where each step lives::

    load / sinusoidal / from_transformer_lens   ->  PositionalEmbedding(matrix, provenance)
    pca, fit_helix, periodicity, fit_recurrence, subspace_overlap   ->  frozen results
    rotary_atlas (rotary models: q/k weights read by role)          ->  RotaryAtlas
    hidden_positions (any model run on a corpus)  ->  HiddenPositions: each layer's pos[t] as a table
    attention_by_offset                         ->  AttentionByOffset: attention and logits vs offset
    pos_geometry.plotting                       ->  plotly figures (never shown)

Importing the package does nothing global: no network, no printing, no plotly settings.
"""

from pos_geometry._version import __version__
from pos_geometry.analysis._batch import BatchResult
from pos_geometry.analysis._nulls import NullTest
from pos_geometry.analysis.helix import HelixFit, fit_helix
from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.analysis.periodicity import PeriodicityResult, PeriodPeak, periodicity
from pos_geometry.analysis.procrustes import align_bases
from pos_geometry.analysis.recurrence import RecurrenceFit, fit_recurrence
from pos_geometry.analysis.rotary_atlas import RotaryAtlas, rotary_atlas
from pos_geometry.analysis.subspace import SubspaceOverlap, subspace_overlap
from pos_geometry.embedding import PositionalEmbedding, Provenance, TokenEmbedding
from pos_geometry.encodings.sinusoidal import sinusoidal
from pos_geometry.errors import (
    AccessDeniedError,
    CheckpointFormatError,
    DeviceMismatchError,
    ExportError,
    InvalidArgumentError,
    MissingTensorError,
    NoLearnedTableError,
    NonFiniteError,
    NotApplicableError,
    NotCachedError,
    PosGeometryError,
    RemoteError,
    RevisionNotFoundError,
    UnknownModelError,
    UnsafeCheckpointError,
)
from pos_geometry.hidden import AttentionByOffset, HiddenPositions, attention_by_offset, hidden_positions
from pos_geometry.loading import load, load_token_embedding
from pos_geometry.registry import ModelSpec, get_spec
from pos_geometry.sources.lens import from_transformer_lens

__all__ = [
    "__version__",
    # the data type
    "PositionalEmbedding",
    "Provenance",
    "TokenEmbedding",
    # loading
    "load",
    "load_token_embedding",
    "sinusoidal",
    "from_transformer_lens",
    "ModelSpec",
    "get_spec",
    # analysis
    "pca",
    "PCAResult",
    "align_bases",
    "fit_helix",
    "HelixFit",
    "periodicity",
    "PeriodicityResult",
    "PeriodPeak",
    "fit_recurrence",
    "RecurrenceFit",
    "subspace_overlap",
    "SubspaceOverlap",
    "BatchResult",
    "NullTest",
    "rotary_atlas",
    "RotaryAtlas",
    # inside the network
    "hidden_positions",
    "HiddenPositions",
    "attention_by_offset",
    "AttentionByOffset",
    # errors
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
