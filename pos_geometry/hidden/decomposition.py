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

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Unpack

import numpy as np
import torch

from pos_geometry._device import Device
from pos_geometry._dtypes import dtype_name
from pos_geometry.analysis._results import Result
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.hidden.attention import AttentionByOffset, OffsetCollector, check_max_offset
from pos_geometry.hidden.forward import hook_point, run_batches
from pos_geometry.hidden.metrics import METRIC_NAMES, layer_metrics
from pos_geometry.hidden.run import Run, RunOptions, check_layers, start
from pos_geometry.hidden.running_sums import PositionSums

__all__ = ["HiddenPositions", "hidden_positions"]


@dataclass(frozen=True, eq=False, repr=False)
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
        attention: the :class:`AttentionByOffset` measured in the same pass (``attention=``), else
            None; not written by ``to_dict`` (it has its own).
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
    attention: AttentionByOffset | None = field(default=None, metadata={"serialize": False})

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

    @property
    def skip_first(self) -> int:
        """How many first positions the ``*_late`` metrics leave out."""
        return int(self.provenance.config_dict.get("skip_first", 0))

    def _at_floor(self) -> str:
        """The layers whose positional share is under 2x its sampling floor (:data:`~pos_geometry.hidden.reading.FLOOR_FACTOR`)."""
        ratio = self.metrics["positional_over_floor"]
        return ", ".join(str(layer) for layer, r in zip(self.layers, ratio, strict=True) if r < 2)

    def summary_rows(self) -> list[tuple[str, str]]:
        def fmt(name: str) -> str:
            return ", ".join(f"{v:.3f}" for v in self.metrics[name])

        return [
            ("corpus", self.corpus),
            ("positional encoding", self.positional_encoding),
            ("layers", ", ".join(str(i) for i in self.layers)),
            ("positional share", fmt("positional_share")),
            (f"sampling floor ({self.n_sequences} contexts)", fmt("positional_floor")),
            ("at the floor (share < 2 x floor)", self._at_floor() or "none"),
            (f"positional share, first {self.skip_first} positions left out", fmt("positional_share_late")),
            (f"top-{self.n_components} ratio", fmt("top_k_ratio")),
            ("stable rank", fmt("stable_rank")),
            (f"smoothness (lowest {self.n_frequencies} DCT)", fmt("smoothness")),
            ("max cosine pos/ctx", fmt("max_cosine")),
            ("‖pos[0]‖ / median", fmt("position0_norm_ratio")),
        ]


def _attention_blocks(
    attention: bool | Sequence[int] | int, chosen: tuple[int, ...], n_layers: int
) -> tuple[int, ...]:
    if attention is True:
        return tuple(layer for layer in chosen if layer < n_layers)
    if attention is False or attention is None:
        return ()
    return check_layers(attention, n_layers - 1)


def hidden_positions(
    model: Any,
    tokens: Any = None,
    *,
    layers: Sequence[int] | int | None = None,
    batch_size: int | None = None,
    device: Device = "auto",
    n_components: int = 3,
    n_frequencies: int = 10,
    attention: bool | Sequence[int] | int = False,
    max_offset: int | None = None,
    skip_first: int = 2,
    **options: Unpack[RunOptions],
) -> HiddenPositions:
    """Decompose each layer's hidden states into position, context and residual parts (streamed).

    Args:
        model: a model-table name, a hub repo id, a local transformers folder, or a loaded
            transformers model (left on its device).
        tokens: ``(n_sequences, seq_len)`` int token ids (array or tensor), a ``.npy`` file of them,
            a text file (tokenised with the model's tokenizer), or None for the offline default:
            random tokens drawn with ``random_state``, labelled so in every provenance.
        layers: layer indices in ``0..n_layers`` (default all; negative ones count from the end);
            layer ``i < n_layers`` is the residual stream entering block ``i`` (0 = the embedding
            output), layer ``n_layers`` the last block's output before the final norm.
        batch_size: contexts per forward pass (default: 1024 tokens per pass on a CPU, 16384 on an
            accelerator); memory does not depend on the number of contexts.
        device: ``"auto"`` (CUDA, MPS, else CPU) or a device; a loaded model stays where it is.
        n_components: ``k`` of the top-k ratio and of the subspaces compared.
        n_frequencies: size of the low-frequency DCT block of the smoothness metric.
        attention: also measure :func:`~pos_geometry.attention_by_offset` in the same forward pass:
            True for the blocks among ``layers`` (layer ``i < n_layers`` is block ``i``'s input),
            or block indices; the result is ``result.attention`` (None when there is no block).
        max_offset: as in :func:`~pos_geometry.attention_by_offset`.
        skip_first: the ``*_late`` metrics leave out positions ``0..skip_first-1`` (real models put
            massive activations there); 0 leaves nothing out (those metrics are then NaN).
        **options: :class:`~pos_geometry.hidden.run.RunOptions`: ``seq_len``, ``n_sequences``
            (corpus shape; defaults: the model's context capped at 1024, 64 contexts for the random
            default, all contexts of arrays and files), ``random_state``, ``tokenizer``,
            ``revision``, ``progress`` (called with ``(contexts done, total)`` after each batch).

    Returns:
        :class:`HiddenPositions`; ``result.positional[layer]`` is ``pos[t]`` ``(seq_len, d_model)``
        float32, a :class:`PositionalEmbedding` of kind ``"hidden"``.
    """
    for name, value in (("n_components", n_components), ("n_frequencies", n_frequencies)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name} must be an int >= 1; got {value!r}.")
    check_max_offset(max_offset)
    if isinstance(skip_first, bool) or not isinstance(skip_first, int) or skip_first < 0:
        raise InvalidArgumentError(f"skip_first must be an int >= 0; got {skip_first!r}.")
    run = start(model, tokens, batch_size=batch_size, device=device, options=options)
    chosen = check_layers(layers, run.loaded.n_layers)
    blocks = _attention_blocks(attention, chosen, run.loaded.n_layers)
    sums = {layer: PositionSums(skip_first) for layer in chosen}
    collector = OffsetCollector(run.loaded, blocks) if blocks else None
    with collector.probing() if collector is not None else contextlib.nullcontext():
        run_batches(
            run, hidden_layers=chosen, on_hidden=lambda layer, h: sums[layer].update(h),
            through_block=max(blocks, default=-1),
        )  # fmt: skip
    result = _result(
        run, chosen, sums, n_components=n_components, n_frequencies=n_frequencies, skip_first=skip_first
    )
    if collector is None:
        return result
    return dataclasses.replace(result, attention=collector.result(run, max_offset))


def _result(
    run: Run,
    chosen: tuple[int, ...],
    sums: dict[int, PositionSums],
    *,
    n_components: int,
    n_frequencies: int,
    skip_first: int,
) -> HiddenPositions:
    """The :class:`HiddenPositions` of the finished sums of ``chosen``."""
    loaded, corpus = run.loaded, run.corpus
    config = {**run.config(), "skip_first": skip_first}
    stored = dtype_name(next(loaded.module.parameters()).dtype)
    points = tuple(hook_point(loaded, layer) for layer in chosen)

    def provenance(source: str, **fields: Any) -> Provenance:
        return Provenance(
            model_id=loaded.model_id, kind="hidden", source=f"{loaded.model_id}: residual stream at {source}",
            revision=loaded.revision, config={**config, **fields}, original_dtype=stored,
            processing=("mean_over_contexts", "center_positions"),
        )  # fmt: skip

    positional: dict[int, PositionalEmbedding] = {}
    rows: list[dict[str, Any]] = []
    means = []
    for layer, point in zip(chosen, points, strict=True):
        dec = sums.pop(layer).finish()
        rows.append(layer_metrics(dec, n_components=n_components, n_frequencies=n_frequencies))
        means.append(dec.grand_mean)
        prov = provenance(point, layer=layer, hook_point=point)
        positional[layer] = PositionalEmbedding(dec.positional.to(torch.float32), prov)
    k = min(n_components, corpus.seq_len - 1, loaded.d_model)
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
        provenance=provenance(
            f"{len(chosen)} layer(s) of {loaded.blocks_path}", layers=chosen, hook_points=points
        ),
    )
