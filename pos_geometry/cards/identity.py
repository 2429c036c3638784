"""The card's first section: what the model is and how it encodes position.

:func:`subject` opens the model once: its checkpoint (config, where it was read), its architecture (layer
types, their rotation and span, asked of transformers through
:func:`~pos_geometry.registry.architecture.describe_architecture`) and its positional table(s) through
:func:`~pos_geometry.load`, one per rotating layer type when the types rotate differently. Every later
section reads the :class:`Subject`, never the model name again for what it is.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pos_geometry.cards.result import Section, Verdict, ran, short_reason
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    MissingTensorError,
    NoLearnedTableError,
    NotCachedError,
)

__all__ = ["KINDS", "Subject", "identity_section", "subject"]

KINDS = ("learned table", "rotary", "rotary, per layer type", "no positional table", "table file")
"""How a card's model encodes position (:attr:`~pos_geometry.cards.result.Card.kind`)."""

_CONFIG_ROWS = (
    ("model type", ("model_type",)),
    ("layers", ("num_hidden_layers", "n_layer")),
    ("d_model", ("hidden_size", "n_embd", "d_model")),
    ("attention heads", ("num_attention_heads", "n_head")),
    ("key/value heads", ("num_key_value_heads",)),
    ("head dimension", ("head_dim",)),
    ("context", ("max_position_embeddings", "n_positions", "n_ctx")),
)


@dataclass(frozen=True, eq=False)
class Subject:
    """The model a card describes, opened once.

    Attributes:
        model: the model as given; ``revision``: the revision asked for.
        kind: one of :data:`KINDS`; ``reason``: how it was decided.
        tables: the positional table(s): ``{"": table}``, or one per rotating layer type; empty when the
            model has none.
        config: the model's config (None for a bare table file).
        architecture: its :class:`~pos_geometry.registry.architecture.Architecture` for rotary models.
        location: where the checkpoint was read (a folder, file or ``repo@commit``).
        no_model: why there is no model around the table (a bare table file), else empty.
        unavailable: why the model's weights cannot be read here (a folder holding its config alone, a
            missing or unreadable weight file), else empty: the sections that read weights say so.
    """

    model: str
    revision: str | None
    kind: str
    reason: str
    tables: Mapping[str, PositionalEmbedding] = field(default_factory=dict)
    config: Mapping[str, Any] | None = None
    architecture: Any = None
    location: str = ""
    no_model: str = ""
    unavailable: str = ""
    _opened: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def opened(self, device: Any) -> Any:
        """The model itself (:func:`~pos_geometry.open_model`), opened on first use and shared by every section
        that runs it, so the card loads (and dequantises) it once; a failure to open is raised to each."""
        if "model" not in self._opened:
            from pos_geometry.hidden.opening import open_model

            try:
                self._opened["model"] = open_model(self.model, device=device, revision=self.revision)
            except Exception as exc:  # every section that runs the model reports it its own way
                self._opened["model"] = exc
        opened = self._opened["model"]
        if isinstance(opened, Exception):
            raise opened
        return opened

    @property
    def table(self) -> PositionalEmbedding | None:
        """The one positional table (the first layer type's for per-type rotary models), or None."""
        return next(iter(self.tables.values()), None)

    @property
    def provenance(self) -> Provenance:
        """The table's provenance, or, for a model without one, a provenance naming the model."""
        if self.table is not None:
            return self.table.provenance
        return Provenance(  # "hidden": what the card reads of such a model is the model as it runs
            model_id=self.model,
            kind="hidden",
            source=self.location or self.model,
            revision=self.revision,
            config=tuple((k, v) for k, v in (self.config or {}).items() if isinstance(v, str | int | float)),
            processing=("no positional table",),
        )

    @property
    def context(self) -> int | None:
        """The model's context length from its config (the ``"context"`` row of the identity), or None."""
        value = _first(self.config or {}, dict(_CONFIG_ROWS)["context"])
        return int(value) if value is not None else None

    @property
    def is_rotary(self) -> bool:
        return self.kind.startswith("rotary")


def _layer_types(config: Mapping[str, Any]) -> Any:
    from pos_geometry.registry.architecture import describe_architecture

    try:
        return describe_architecture(config)
    except Exception:  # the architecture cannot be described: the sections that need it say so
        return None


def subject(model: Any, *, revision: str | None = None) -> Subject:
    """Open ``model`` (a model-table name, hub repo id, folder, ``.gguf`` file, table file, or a model opened by
    :func:`~pos_geometry.open_model`, whose source the checkpoint reads come from) once.

    Raises what :func:`~pos_geometry.load` raises when the model cannot be found at all.
    """
    from pos_geometry.hidden.model import LoadedModel
    from pos_geometry.hidden.opening import open_model

    if isinstance(model, LoadedModel):
        model = open_model(model, revision=revision)  # (checked against the revision asked, loads nothing)
        opened = _subject(model.checkpoint_source("the card's table and atlas"), model.revision)
        opened._opened["model"] = model
        return opened
    return _subject(os.fspath(model), revision)


def _subject(name: str, revision: str | None) -> Subject:
    from pos_geometry.loading import load
    from pos_geometry.sources.opening import open_checkpoint

    try:
        checkpoint = open_checkpoint(name, revision=revision)
        config, location, no_model = dict(checkpoint.config), str(checkpoint.location or name), ""
    except CheckpointFormatError as exc:  # a table file with no model (no config.json) around it
        config, location, no_model = None, name, str(exc)
    except (
        InvalidArgumentError
    ):  # not a path, a model-table name or a repo id: load says so, with the closest names
        load(name, revision=revision)
        raise
    try:
        pe = load(name, revision=revision)
    except NoLearnedTableError as exc:
        if config is None:
            raise
        return Subject(name, revision, "no positional table", str(exc), {}, config, None, location)
    except Exception as exc:
        architecture = _layer_types(config) if config is not None else None
        if architecture is None or not architecture.rotates_by_type():
            if config is not None and isinstance(
                exc, CheckpointFormatError | MissingTensorError | NotCachedError
            ):
                return _unreadable(name, revision, config, location, exc)
            raise
        tables = {
            lt.label: load(name, revision=revision, layer_type=lt.label)
            for lt in architecture.layer_types
            if lt.rotary is not None
        }
        if not tables:
            raise exc from None
        reason = (
            "the layer types rotate with different frequencies; one exact rotary table per type, built from "
            "the config"
        )
        return Subject(
            name, revision, "rotary, per layer type", reason, tables, config, architecture, location
        )
    if config is None:
        return Subject(
            name,
            revision,
            "table file",
            f"a bare table: {no_model}",
            {"": pe},
            None,
            None,
            location,
            no_model,
        )
    if pe.kind == "rotary":
        architecture = _layer_types(config)
        reason = (
            "rotary position embeddings: no learned table; the exact rotary table is built from the config"
        )
        return Subject(name, revision, "rotary", reason, {"": pe}, config, architecture, location)
    reason = f"a {pe.kind} positional table ({pe.provenance.tensor_key or 'the array'})"
    return Subject(name, revision, "learned table", reason, {"": pe}, config, None, location)


def _unreadable(
    name: str, revision: str | None, config: Mapping[str, Any], location: str, exc: Exception
) -> Subject:
    """A model whose config is here but whose weights cannot be read: its kind from the config, no table."""
    from pos_geometry.hidden.model import positional_kind

    kind = {"learned": "learned table", "rotary": "rotary"}.get(
        positional_kind(dict(config)), "no positional table"
    )
    why = str(exc)
    reason = f"from its config (its weights cannot be read here: {short_reason(why)})"
    return Subject(name, revision, kind, reason, {}, config, None, location, unavailable=why)


def _first(config: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((config[k] for k in keys if config.get(k) is not None), None)


def _stored_types(path: str) -> str | None:
    """For a local file or folder: how many tensors are stored in each type (``"Q4_1 ×210, F32 ×61"``)."""
    if not Path(path).expanduser().exists():
        return None
    from pos_geometry.sources.checkpoint_summary import describe_checkpoint

    try:
        summary = describe_checkpoint(path)
    except Exception:  # the identity section reports what it can; the loaders already read the file
        return None
    counts = Counter(t.stored_type or "?" for t in summary.tensors)
    return f"{summary.format}: " + ", ".join(f"{k} ×{n}" for k, n in counts.most_common())


def identity_section(s: Subject) -> Section:
    """Source, commit, format, stored types, architecture, layer types and the kind of position."""
    prov = s.provenance
    rows: list[tuple[str, str]] = [
        ("model", s.model),
        ("read from", s.location or prov.source),
        ("revision / commit", f"{prov.revision or '-'} / {prov.commit or '-'}"),
    ]
    stored = _stored_types(s.model)
    if stored:
        rows.append(("stored as", stored))
    if s.table is not None:
        if prov.kind in ("rotary", "sinusoidal"):  # built from the config: no table is stored in the file
            how = (
                f"computed from the config ({prov.kind}, {str(s.table.matrix.dtype).removeprefix('torch.')})"
            )
        else:
            how = f"stored as {prov.original_dtype or '?'}"
        rows.append(("table", f"{s.table.n_positions} × {s.table.d_model}, {how}"))
    for label, keys in _CONFIG_ROWS:
        value = _first(s.config or {}, keys)
        if value is not None:
            rows.append((label, str(value)))
    arch = s.architecture if s.is_rotary else None
    if arch is not None:
        from pos_geometry.registry.architecture import layer_list

        rows += [
            (f"layer type {lt.label}", f"layers {layer_list(lt.layers)}: {lt.describe()}")
            for lt in arch.layer_types
        ]
    rows.append(("position", f"{s.kind}: {s.reason}"))
    if s.no_model:
        rows.append(("no model", s.no_model))
    words = {
        "learned table": "a learned positional table",
        "rotary": "rotary position embeddings (no learned table)",
        "rotary, per layer type": "rotary position embeddings, each layer type with its own frequencies",
        "no positional table": f"no positional table ({short_reason(s.reason)})",
        "table file": "a bare positional table (no model around it)",
    }[s.kind]
    detail = ""
    if arch is not None:
        detail = "; " + "; ".join(
            f"{lt.label} (layers {layer_list(lt.layers)}): {lt.describe()}" for lt in arch.layer_types
        )
    values = {"kind": s.kind, "reason": s.reason, "config": dict(s.config or {}), "location": s.location}
    return ran("identity", (Verdict(f"position: {words}{detail}", null=None),), rows, values, (prov,))
