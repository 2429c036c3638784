"""``hidden_positions``: the positional part of every layer's hidden states, streamed over contexts.

Song & Zhong (2023, "Uncovering hidden geometry in Transformers via disentangling position and
context") write each layer's hidden states as ``h[c, t] = μ + pos[t] + ctx[c] + resid[c, t]``
over contexts ``c`` and positions ``t``. Here ``pos[t]`` of every requested layer is computed from
running sums (:mod:`~pos_geometry.hidden.running_sums`: memory does not grow with the number of
contexts), measured (:mod:`~pos_geometry.hidden.metrics`), and returned as a
:class:`~pos_geometry.embedding.PositionalEmbedding` of kind ``"hidden"``, so ``pca``,
``fit_helix``, ``periodicity`` and ``fit_recurrence`` apply to it unchanged.

The model runs under transformers with forward hooks (why hooks and not ``output_hidden_states``
or TransformerLens: :mod:`~pos_geometry.hidden.forward`; TransformerLens 4.x's bridge wraps the
same transformers model and adds its own hook layer, so it brings nothing here but overhead).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from pos_geometry._dtypes import dtype_name
from pos_geometry.analysis._results import Result
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.hidden.corpus import Corpus, make_corpus
from pos_geometry.hidden.forward import hook_point, run_batches
from pos_geometry.hidden.metrics import METRIC_NAMES, layer_metrics
from pos_geometry.hidden.model import LoadedModel, open_model, positional_kind
from pos_geometry.hidden.running_sums import PositionSums

__all__ = ["HiddenPositions", "hidden_positions", "check_layers", "check_batch_size"]


@dataclass(frozen=True, eq=False)
class HiddenPositions(Result):
    """The positional part of some layers' hidden states, with per-layer metrics.

    Layer ``i`` is the residual stream entering block ``i`` (0 = the embedding output); layer
    ``n_layers`` is the last block's output before the final norm.

    Attributes:
        layers: the layer indices, in order.
        positional: ``{layer: PositionalEmbedding (seq_len, d_model)}`` of kind ``"hidden"``
            (``pos[t]``, which sums to zero over positions); not written by ``to_dict``.
        grand_mean: ``(n_layers_read, d_model)`` ``μ`` of each layer.
        metrics: ``{name: (n_layers_read,) float64}`` for every name in :data:`METRIC_NAMES`
            (definitions in :mod:`pos_geometry.hidden.metrics`).
        principal_angles: ``(n_layers_read, n_components)`` degrees between the positional and
            context subspaces.
        hook_points: where each layer was read (``"transformer.h.0 (input)"``).
        n_components, n_frequencies: as passed.
        n_sequences, seq_len: the corpus shape.
        corpus: the corpus description (the random default says so).
        positional_encoding: how position enters the model: ``"learned"``, ``"rotary"`` or ``"none"``.
        provenance: the model, revision, corpus and what was computed (kind ``"hidden"``).
    """

    layers: tuple[int, ...]
    positional: Mapping[int, PositionalEmbedding] = field(metadata={"serialize": False})
    grand_mean: torch.Tensor
    metrics: Mapping[str, np.ndarray]
    principal_angles: np.ndarray
    hook_points: tuple[str, ...]
    n_components: int
    n_frequencies: int
    n_sequences: int
    seq_len: int
    corpus: str
    positional_encoding: str
    provenance: Provenance

    def metric(self, name: str) -> np.ndarray:
        """``(n_layers_read,)`` values of one metric (see :data:`METRIC_NAMES`)."""
        if name not in self.metrics:
            raise InvalidArgumentError(f"unknown metric {name!r}; known: {', '.join(METRIC_NAMES)}.")
        return self.metrics[name]

    def metrics_rows(self) -> list[dict[str, Any]]:
        """One dict per layer: ``layer``, ``hook_point`` and every metric (for CSV/JSON)."""
        rows = []
        for i, layer in enumerate(self.layers):
            row: dict[str, Any] = {"layer": layer, "hook_point": self.hook_points[i]}
            row.update({name: float(self.metrics[name][i]) for name in METRIC_NAMES})
            row.update({f"angle_{j + 1}": float(a) for j, a in enumerate(self.principal_angles[i])})
            rows.append(row)
        return rows

    def summary_rows(self) -> list[tuple[str, str]]:
        def fmt(name: str) -> str:
            return ", ".join(f"{v:.3f}" for v in self.metrics[name])

        return [
            ("corpus", self.corpus),
            ("positional encoding", self.positional_encoding),
            ("layers", ", ".join(str(i) for i in self.layers)),
            ("positional share", fmt("positional_share")),
            (f"top-{self.n_components} ratio", fmt("top_k_ratio")),
            ("stable rank", fmt("stable_rank")),
            (f"smoothness (lowest {self.n_frequencies} DCT)", fmt("smoothness")),
            ("max cosine pos/ctx", fmt("max_cosine")),
            ("‖pos[0]‖ / median", fmt("position0_norm_ratio")),
        ]


def check_layers(layers: Sequence[int] | int | None, n_layers: int) -> tuple[int, ...]:
    """Sorted unique layer indices in ``0..n_layers`` (negative ones count from ``n_layers + 1``)."""
    if layers is None:
        return tuple(range(n_layers + 1))
    items = [layers] if isinstance(layers, int) else list(layers)
    out = []
    for layer in items:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
            raise InvalidArgumentError(f"layers must be ints; got {layer!r} ({type(layer).__name__}).")
        index = int(layer) + (n_layers + 1 if layer < 0 else 0)
        if not 0 <= index <= n_layers:
            raise InvalidArgumentError(
                f"layer {layer} is out of range: this model has layers 0..{n_layers} (0 = embedding output, "
                f"{n_layers} = last block's output)."
            )
        out.append(index)
    if not out:
        raise InvalidArgumentError("layers is empty; pass None for every layer.")
    return tuple(sorted(set(out)))


def check_batch_size(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be an int >= 1; got {batch_size!r}.")
    return batch_size


def prepare(
    model: Any,
    tokens: Any,
    *,
    device: Any,
    revision: str | None,
    seq_len: int | None,
    n_sequences: int | None,
    random_state: int,
    tokenizer: Any,
) -> tuple[LoadedModel, Corpus]:
    """The loaded model and its corpus (a text corpus uses ``tokenizer`` or the model folder's own)."""
    loaded = open_model(model, device=device, revision=revision)
    if tokenizer is None and tokens is not None and loaded.tokenizer_source is not None:
        from pathlib import Path

        if isinstance(tokens, str | Path) and Path(tokens).suffix.lower() != ".npy":
            try:
                import transformers

                tokenizer = transformers.AutoTokenizer.from_pretrained(loaded.tokenizer_source)
            except (OSError, ValueError):
                tokenizer = None
    corpus = make_corpus(
        tokens,
        vocab_size=loaded.vocab_size,
        context_length=loaded.context_length,
        seq_len=seq_len,
        n_sequences=n_sequences,
        random_state=random_state,
        tokenizer=tokenizer,
    )
    return loaded, corpus


def base_config(loaded: LoadedModel, corpus: Corpus) -> dict[str, Any]:
    """The provenance config fields every hidden-state result shares."""
    return {
        "model_type": loaded.model_type,
        "n_layers": loaded.n_layers,
        "d_model": loaded.d_model,
        "positional_encoding": positional_kind(loaded.config),
        "corpus": corpus.description,
        "corpus_source": corpus.source,
        "n_sequences": corpus.n_sequences,
        "seq_len": corpus.seq_len,
    }


def hidden_positions(
    model: Any,
    tokens: Any = None,
    *,
    layers: Sequence[int] | int | None = None,
    batch_size: int = 8,
    device: Any = "auto",
    n_components: int = 3,
    n_frequencies: int = 10,
    seq_len: int | None = None,
    n_sequences: int | None = None,
    random_state: int = 0,
    tokenizer: Any = None,
    revision: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> HiddenPositions:
    """Decompose each layer's hidden states into position, context and residual parts (streamed).

    Args:
        model: a model-table name, a hub repo id, a local transformers folder, or a loaded
            transformers model (left on its device).
        tokens: ``(n_sequences, seq_len)`` int token ids (array or tensor), a ``.npy`` file of them,
            a text file (tokenised with the model's tokenizer), or None for the offline default:
            random tokens drawn with ``random_state``, labelled so in every provenance.
        layers: layer indices in ``0..n_layers`` (default all); 0 is the embedding output.
        batch_size: contexts per forward pass; memory does not depend on the number of contexts.
        device: ``"auto"`` (CUDA, MPS, else CPU) or a device; a loaded model stays where it is.
        n_components: ``k`` of the top-k ratio and of the subspaces compared.
        n_frequencies: size of the low-frequency DCT block of the smoothness metric.
        seq_len, n_sequences: corpus shape (defaults: the model's context capped at 1024; 64 contexts
            for the random default; all contexts of arrays and files).
        progress: called with ``(contexts done, total)`` after each batch.

    Returns:
        :class:`HiddenPositions`; ``result.positional[layer]`` is ``pos[t]`` ``(seq_len, d_model)``
        float32, a :class:`PositionalEmbedding` of kind ``"hidden"``.
    """
    batch_size = check_batch_size(batch_size)
    if isinstance(n_components, bool) or not isinstance(n_components, int) or n_components < 1:
        raise InvalidArgumentError(f"n_components must be an int >= 1; got {n_components!r}.")
    if isinstance(n_frequencies, bool) or not isinstance(n_frequencies, int) or n_frequencies < 1:
        raise InvalidArgumentError(f"n_frequencies must be an int >= 1; got {n_frequencies!r}.")
    loaded, corpus = prepare(
        model, tokens, device=device, revision=revision, seq_len=seq_len, n_sequences=n_sequences,
        random_state=random_state, tokenizer=tokenizer,
    )  # fmt: skip
    chosen = check_layers(layers, loaded.n_layers)
    sums = {layer: PositionSums() for layer in chosen}
    run_batches(
        loaded, corpus, batch_size=batch_size, hidden_layers=chosen,
        on_hidden=lambda layer, h: sums[layer].update(h), progress=progress,
    )  # fmt: skip
    config = base_config(loaded, corpus)
    stored = dtype_name(next(loaded.module.parameters()).dtype)
    positional: dict[int, PositionalEmbedding] = {}
    rows: list[dict[str, Any]] = []
    means = []
    points = tuple(hook_point(loaded, layer) for layer in chosen)
    for layer, point in zip(chosen, points, strict=True):
        dec = sums.pop(layer).finish()
        rows.append(layer_metrics(dec, n_components=n_components, n_frequencies=n_frequencies))
        means.append(dec.grand_mean)
        prov = Provenance(
            model_id=loaded.model_id,
            kind="hidden",
            source=f"{loaded.model_id}: residual stream at {point}",
            revision=loaded.revision,
            config={**config, "layer": layer, "hook_point": point},
            original_dtype=stored,
            processing=("mean_over_contexts", "center_positions"),
        )
        positional[layer] = PositionalEmbedding(dec.positional.to(torch.float32), prov)
    k = min(n_components, corpus.seq_len - 1, loaded.d_model)
    provenance = Provenance(
        model_id=loaded.model_id,
        kind="hidden",
        source=f"{loaded.model_id}: residual stream at {len(chosen)} layer(s) of {loaded.blocks_path}",
        revision=loaded.revision,
        config={**config, "layers": chosen, "hook_points": points},
        original_dtype=stored,
        processing=("mean_over_contexts", "center_positions"),
    )
    return HiddenPositions(
        layers=chosen,
        positional=MappingProxyType(positional),
        grand_mean=torch.stack(means).to(torch.float32),
        metrics=MappingProxyType({name: np.array([r[name] for r in rows]) for name in METRIC_NAMES}),
        principal_angles=np.stack([r["principal_angles"][:k] for r in rows]),
        hook_points=points,
        n_components=n_components,
        n_frequencies=n_frequencies,
        n_sequences=corpus.n_sequences,
        seq_len=corpus.seq_len,
        corpus=corpus.description,
        positional_encoding=config["positional_encoding"],
        provenance=provenance,
    )
