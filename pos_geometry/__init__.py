"""pos_geometry: the geometry of positional embeddings in pretrained transformers.

The data flow, and where each step lives::

    load / sinusoidal / from_transformer_lens   ->  PositionalEmbedding(matrix, provenance)
    pca, fit_helix, periodicity, fit_recurrence, identify, subspace_overlap   ->  frozen results
    rotary_atlas (rotary models: q/k weights read by role)          ->  RotaryAtlas
    plane_preference (which heads lean on the fast planes, tested)  ->  PlanePreference
    position_qk_atlas (learned tables: how each head's QK reads it) ->  PositionQKAtlas
    hidden_positions (any model run on a corpus)  ->  HiddenPositions: each layer's pos[t] as a table
    attention_by_offset                         ->  AttentionByOffset: attention and logits vs offset
    intervene / intervene_sweep (edits in pos_geometry.interventions) -> Intervention: Δloss of an edit
    sweep (every training checkpoint: range reads, metrics, drift)  ->  SweepResult (CSV/Parquet/JSON)
    card (every analysis that applies to one model, each with its null)  ->  Card (index.html, JSON, Markdown)
    compare (several models' cards side by side: a verdict matrix and overlays)  ->  Comparison
    pos_geometry.plotting                       ->  plotly figures (never shown)

Importing the package does nothing global: no network, no printing, no plotly settings. It is also
cheap: each public name is imported from its module on first use (PEP 562), so ``pos-geometry --help``
does not pay for torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pos_geometry._version import __version__

_EXPORTS: dict[str, str] = {
    "Analysis": "pos_geometry.analysis.pipeline",
    "analyze": "pos_geometry.analysis.pipeline",
    "BatchResult": "pos_geometry.analysis._batch",
    "NullTest": "pos_geometry.analysis.nulls.monte_carlo",
    "HelixFit": "pos_geometry.analysis.helix",
    "fit_helix": "pos_geometry.analysis.helix",
    "PCAResult": "pos_geometry.analysis.pca",
    "pca": "pos_geometry.analysis.pca",
    "PeriodicityResult": "pos_geometry.analysis.periodicity",
    "PeriodPeak": "pos_geometry.analysis.periodicity",
    "periodicity": "pos_geometry.analysis.periodicity",
    "align_bases": "pos_geometry.analysis.procrustes",
    "RecurrenceFit": "pos_geometry.analysis.recurrence",
    "Identification": "pos_geometry.analysis.identify",
    "identify": "pos_geometry.analysis.identify",
    "fit_recurrence": "pos_geometry.analysis.recurrence",
    "RotaryAtlas": "pos_geometry.atlas.rotary",
    "rotary_atlas": "pos_geometry.atlas.rotary",
    "PlanePreference": "pos_geometry.atlas.plane_preference",
    "plane_preference": "pos_geometry.atlas.plane_preference",
    "PositionQKAtlas": "pos_geometry.atlas.position_qk",
    "position_qk_atlas": "pos_geometry.atlas.position_qk",
    "qk_atlas": "pos_geometry.atlas.qk",
    "SubspaceOverlap": "pos_geometry.analysis.subspace",
    "subspace_overlap": "pos_geometry.analysis.subspace",
    "PositionalEmbedding": "pos_geometry.embedding",
    "Provenance": "pos_geometry.embedding",
    "TokenEmbedding": "pos_geometry.embedding",
    "sinusoidal": "pos_geometry.encodings.sinusoidal",
    "AccessDeniedError": "pos_geometry.errors",
    "CheckpointFormatError": "pos_geometry.errors",
    "DeviceMismatchError": "pos_geometry.errors",
    "ExportError": "pos_geometry.errors",
    "InvalidArgumentError": "pos_geometry.errors",
    "MissingTensorError": "pos_geometry.errors",
    "NoLearnedTableError": "pos_geometry.errors",
    "NonFiniteError": "pos_geometry.errors",
    "NotApplicableError": "pos_geometry.errors",
    "NotCachedError": "pos_geometry.errors",
    "PosGeometryError": "pos_geometry.errors",
    "RemoteError": "pos_geometry.errors",
    "RevisionNotFoundError": "pos_geometry.errors",
    "UnknownModelError": "pos_geometry.errors",
    "UnsafeCheckpointError": "pos_geometry.errors",
    "load": "pos_geometry.loading",
    "load_token_embedding": "pos_geometry.loading",
    "ModelSpec": "pos_geometry.registry",
    "get_spec": "pos_geometry.registry",
    "from_transformer_lens": "pos_geometry.sources.lens",
    "open_model": "pos_geometry.hidden.opening",
    "LoadedModel": "pos_geometry.hidden.model",
    "hidden_positions": "pos_geometry.hidden.decomposition",
    "HiddenPositions": "pos_geometry.hidden.decomposition",
    "attention_by_offset": "pos_geometry.hidden.attention",
    "AttentionByOffset": "pos_geometry.hidden.attention",
    "intervene": "pos_geometry.interventions.run",
    "intervene_sweep": "pos_geometry.interventions.run",
    "Intervention": "pos_geometry.interventions.run",
    "InterventionSweep": "pos_geometry.interventions.run",
    "card": "pos_geometry.cards.build",
    "Card": "pos_geometry.cards.result",
    "compare": "pos_geometry.comparison.build",
    "Comparison": "pos_geometry.comparison.result",
    "sweep": "pos_geometry.sweeps",
    "SweepResult": "pos_geometry.sweeps",
    "FetchedTable": "pos_geometry.sources.fetch",
    "fetch_table": "pos_geometry.sources.fetch",
    "describe_checkpoint": "pos_geometry.sources.checkpoint_summary",
    "CheckpointSummary": "pos_geometry.sources.checkpoint_summary",
}
"""Public name -> the module that defines it."""

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
    "fetch_table",
    "FetchedTable",
    "describe_checkpoint",
    "CheckpointSummary",
    # analysis
    "analyze",
    "Analysis",
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
    "identify",
    "Identification",
    "subspace_overlap",
    "SubspaceOverlap",
    "BatchResult",
    "NullTest",
    "rotary_atlas",
    "RotaryAtlas",
    "plane_preference",
    "PlanePreference",
    "position_qk_atlas",
    "PositionQKAtlas",
    "qk_atlas",
    # inside the network
    "open_model",
    "LoadedModel",
    "hidden_positions",
    "HiddenPositions",
    "attention_by_offset",
    "AttentionByOffset",
    # does the model use it: causal edits
    "intervene",
    "intervene_sweep",
    "Intervention",
    "InterventionSweep",
    # one page per model: every verdict that applies, with its null
    "card",
    "Card",
    # one page across models
    "compare",
    "Comparison",
    # training-checkpoint sweeps
    "sweep",
    "SweepResult",
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


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first access, then keep it in the module's namespace."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pos_geometry' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API (``__all__``) and nothing of the module's own plumbing (``importlib``, ``Any``...)."""
    return sorted(__all__)


if TYPE_CHECKING:  # static tools see the real imports
    from pos_geometry.analysis._batch import BatchResult
    from pos_geometry.analysis.helix import HelixFit, fit_helix
    from pos_geometry.analysis.nulls.monte_carlo import NullTest
    from pos_geometry.analysis.pca import PCAResult, pca
    from pos_geometry.analysis.periodicity import PeriodicityResult, PeriodPeak, periodicity
    from pos_geometry.analysis.pipeline import Analysis, analyze
    from pos_geometry.analysis.procrustes import align_bases
    from pos_geometry.analysis.recurrence import RecurrenceFit, fit_recurrence
    from pos_geometry.analysis.subspace import SubspaceOverlap, subspace_overlap
    from pos_geometry.atlas.plane_preference import PlanePreference, plane_preference
    from pos_geometry.atlas.position_qk import PositionQKAtlas, position_qk_atlas
    from pos_geometry.atlas.qk import qk_atlas
    from pos_geometry.atlas.rotary import RotaryAtlas, rotary_atlas
    from pos_geometry.cards.build import card
    from pos_geometry.cards.result import Card
    from pos_geometry.comparison.build import compare
    from pos_geometry.comparison.result import Comparison
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
    from pos_geometry.hidden.attention import AttentionByOffset, attention_by_offset
    from pos_geometry.hidden.decomposition import HiddenPositions, hidden_positions
    from pos_geometry.interventions.run import Intervention, InterventionSweep, intervene, intervene_sweep
    from pos_geometry.loading import load, load_token_embedding
    from pos_geometry.registry import ModelSpec, get_spec
    from pos_geometry.sources.checkpoint_summary import CheckpointSummary, describe_checkpoint
    from pos_geometry.sources.fetch import FetchedTable, fetch_table
    from pos_geometry.sources.lens import from_transformer_lens
    from pos_geometry.sweeps import SweepResult, sweep
