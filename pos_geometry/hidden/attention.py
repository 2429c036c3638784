"""``attention_by_offset``: how much each head attends, and with what logit, as a function of the offset.

For layer ``l`` and head ``h``, over every context and every (query ``i``, key ``j``) pair the
model's mask allows, with ``Δ = i - j``:

* ``mean_probability[l, h, Δ] = mean_{c, i} P[c, h, i, i-Δ]``, the attention probability;
* ``mean_logit[l, h, Δ] = mean_{c, i} (q_i · k_{i-Δ}) · scaling``, the pre-softmax logit (before the mask);
* ``counts[Δ]``: how many pairs each mean is over (``n_sequences × (T - |Δ|)`` for a causal model).

For rotary models, Barbero et al.'s ("Round and round we go! What makes rotary positional encodings
useful?", 2024) per-frequency usage, measured on the actual queries and keys of the corpus:
``q_plane_norm[l, h, i]`` and ``k_plane_norm[l, h, i]`` are the mean 2-norms of rotation plane ``i``'s
two coordinates (a rotation leaves them unchanged, so post-rotary activations give the same value),
and ``plane_usage = q_plane_norm · k_plane_norm`` normalised to sum to 1 per head. Planes follow the
architecture's pairing from :mod:`pos_geometry.registry.attention` and the (scaled) frequencies of
:mod:`pos_geometry.encodings.rotary`. For models without rotary embeddings these fields are None and
``rotary_status`` says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np

from pos_geometry._device import Device
from pos_geometry._dtypes import dtype_name
from pos_geometry.analysis._results import Result
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.hidden.forward import run_batches
from pos_geometry.hidden.model import LoadedModel
from pos_geometry.hidden.offsets import OffsetSums, probing
from pos_geometry.hidden.run import Run, RunOptions, check_layers, start

__all__ = ["AttentionByOffset", "attention_by_offset", "OffsetCollector", "check_max_offset"]


@dataclass(frozen=True, eq=False, repr=False)
class AttentionByOffset(Result):
    """Mean attention probability and pre-softmax logit by offset, per layer and head.

    Attributes:
        layers: the block indices read.
        offsets: ``(n_offsets,)`` int ``Δ = query - key`` (non-negative for causal models).
        mean_probability: ``(n_layers_read, n_heads, n_offsets)`` float64.
        mean_logit: ``(n_layers_read, n_heads, n_offsets)`` float64.
        counts: ``(n_offsets,)`` int64 pairs behind each mean.
        rotary_status: ``"measured"``, or ``"does not apply: ..."`` with the reason.
        q_plane_norm, k_plane_norm, plane_usage: ``(n_layers_read, n_heads, n_planes)`` float64, or None.
        wavelengths: ``(n_planes,)`` ``2π/θ_i`` in positions, or ``(n_layers_read, n_planes)`` when the layer
            types read rotate with different frequencies (NaN rows for blocks that do not rotate), or None.
        n_sequences, seq_len, corpus: the corpus.
        provenance: model, revision, corpus (kind ``"hidden"``).
    """

    layers: tuple[int, ...]
    offsets: np.ndarray
    mean_probability: np.ndarray
    mean_logit: np.ndarray
    counts: np.ndarray
    rotary_status: str
    q_plane_norm: np.ndarray | None
    k_plane_norm: np.ndarray | None
    plane_usage: np.ndarray | None
    wavelengths: np.ndarray | None
    n_sequences: int
    seq_len: int
    corpus: str
    provenance: Provenance

    @property
    def n_heads(self) -> int:
        return int(self.mean_probability.shape[1])

    def profile(self, layer: int, head: int, value: str = "mean_logit") -> tuple[np.ndarray, np.ndarray]:
        """``(offsets, values)`` of one head; ``value`` is ``"mean_logit"`` or ``"mean_probability"``."""
        if layer not in self.layers:
            raise InvalidArgumentError(f"layer {layer} was not read; read layers: {self.layers}.")
        if not 0 <= head < self.n_heads:
            raise InvalidArgumentError(f"head must be in 0..{self.n_heads - 1}; got {head}.")
        if value not in ("mean_logit", "mean_probability"):
            raise InvalidArgumentError(f"value must be 'mean_logit' or 'mean_probability'; got {value!r}.")
        return self.offsets, getattr(self, value)[self.layers.index(layer), head]

    def summary_rows(self) -> list[tuple[str, str]]:
        zero = int(np.searchsorted(self.offsets, 0))
        rows = [
            ("corpus", self.corpus),
            ("layers × heads × offsets", f"{len(self.layers)} × {self.n_heads} × {len(self.offsets)}"),
            ("offsets", f"{self.offsets[0]} .. {self.offsets[-1]}"),
        ]
        for i, layer in enumerate(self.layers):
            self_attn = (
                self.mean_probability[i, :, zero]
                if self.offsets[zero] == 0
                else np.full(self.n_heads, np.nan)
            )
            rows.append((f"layer {layer}: mean P(Δ=0) over heads", f"{np.nanmean(self_attn):.3f}"))
        if self.plane_usage is not None and self.wavelengths is not None:
            usage = self.plane_usage.mean(axis=(0, 1))
            top = np.argsort(usage)[::-1][:3]
            if self.wavelengths.ndim == 1:
                where = [f"wavelength {self.wavelengths[i]:.4g}" for i in top]
            else:  # layer types rotating with different bases: the range over the blocks read
                where = [f"wavelength {np.nanmin(self.wavelengths[:, i]):.4g} to {np.nanmax(self.wavelengths[:, i]):.4g} "
                         "by layer type" for i in top]  # fmt: skip
            rows.append((
                "rotary per-plane usage (mean over layers and heads)",
                f"{len(usage)} planes; most used " + ", ".join(
                    f"plane {int(i)} ({usage[i]:.3f}, {w})" for i, w in zip(top, where, strict=True)
                ) + f"; uniform use {1 / len(usage):.3f} each",
            ))  # fmt: skip
        else:
            rows.append(("rotary per-plane usage", self.rotary_status))
        return rows


def _rotary_planes(loaded: LoadedModel, blocks: tuple[int, ...]) -> tuple[Any, np.ndarray | None, str]:
    """``(planes (n_planes, 2), wavelengths, status)`` from the resolved architecture
    (:func:`~pos_geometry.registry.architecture.describe_architecture`: transformers' description, or the layout
    table's override) for the blocks read. ``wavelengths`` is ``(n_planes,)`` when every block read rotates alike,
    else ``(n_blocks, n_planes)``, one row per block (its layer type's; NaN for a block that does not rotate)."""
    from pos_geometry.encodings.rotary import inverse_frequencies
    from pos_geometry.hidden.model import positional_kind
    from pos_geometry.registry.architecture import attention_of, describe_architecture
    from pos_geometry.registry.derived_layout import LayoutUnavailable
    from pos_geometry.sources.roles import rotation_planes

    kind = positional_kind(loaded.config)
    if kind != "rotary":
        why = (
            "position enters through a learned table"
            if kind == "learned"
            else "the model has no rotary embeddings"
        )
        return None, None, f"does not apply: {why}"
    try:
        layout, _ = attention_of(loaded.config)
        arch = describe_architecture(loaded.config)
    except (LayoutUnavailable, InvalidArgumentError) as exc:
        return (
            None,
            None,
            f"does not apply: the rotation planes of model_type {loaded.model_type!r} are unknown ({exc})",
        )
    params = [arch.layer_type_of(b).rotary if b < arch.n_layers else None for b in blocks]
    rotating = [p for p in params if p is not None]
    if not rotating:
        return None, None, "does not apply: none of the blocks read rotates its queries and keys"
    dims = sorted({p.rotary_dim for p in rotating})
    if len(dims) > 1:
        return (
            None,
            None,
            (
                f"does not apply: the blocks read rotate {', '.join(map(str, dims))} dimensions by layer type; read "
                "the blocks of one layer type at a time (layers=...)"
            ),
        )
    planes = rotation_planes(layout.pairing, dims[0])
    rows = [
        (2 * math.pi / inverse_frequencies(p)).numpy().astype(np.float64) if p is not None
        else np.full(len(planes), np.nan)
        for p in params
    ]  # fmt: skip
    same = all(np.array_equal(r, rows[0], equal_nan=True) for r in rows)
    return planes, (rows[0] if same else np.stack(rows)), "measured"


def check_max_offset(max_offset: int | None) -> None:
    if max_offset is not None and (
        isinstance(max_offset, bool) or not isinstance(max_offset, int) or max_offset < 0
    ):
        raise InvalidArgumentError(f"max_offset must be None or an int >= 0; got {max_offset!r}.")


class OffsetCollector:
    """The running sums of ``blocks``' attention during one pass, and the result they make.

    ``with collector.probing(): ...`` runs the model's attention through the probe
    (:mod:`~pos_geometry.hidden.offsets`) while the forward passes of the corpus run inside.
    """

    def __init__(self, loaded: LoadedModel, blocks: tuple[int, ...]) -> None:
        self.loaded, self.blocks = loaded, blocks
        self.planes, self.wavelengths, self.status = _rotary_planes(loaded, blocks)
        self.sums = {block: OffsetSums(self.planes) for block in blocks}

    def probing(self) -> AbstractContextManager[None]:
        collectors = {m: self.sums[b].update for b in self.blocks for m in self.loaded.blocks[b].modules()}
        return probing(self.loaded.module, collectors)

    def result(self, run: Run, max_offset: int | None) -> AttentionByOffset:
        """The :class:`AttentionByOffset` of everything folded in so far."""
        sums = self.sums
        chosen = tuple(b for b in self.blocks if sums[b].count is not None)  # blocks whose attention was seen
        unseen = tuple(b for b in self.blocks if b not in chosen)
        if not chosen:
            from pos_geometry.errors import NotApplicableError

            raise NotApplicableError(
                f"attention by offset does not apply to block(s) {list(self.blocks)} of {self.loaded.model_id}: none "
                "of them computed softmax attention over keys (a hybrid model's recurrent or linear-attention "
                "blocks hold none); read its attention blocks (layers=...)."
            )
        wavelengths = self.wavelengths
        if unseen and wavelengths is not None and wavelengths.ndim == 2:  # the rows of the blocks read
            wavelengths = wavelengths[[self.blocks.index(b) for b in chosen]]
            if all(np.array_equal(row, wavelengths[0], equal_nan=True) for row in wavelengths):
                wavelengths = wavelengths[0]
        t = run.corpus.seq_len
        offsets = np.arange(-(t - 1), t)  # column Δ + T - 1 of the sums holds offset Δ
        count = sums[chosen[0]].count.cpu().numpy()
        keep = count > 0
        if max_offset is not None:
            keep &= np.abs(offsets) <= max_offset

        def stack(name: str) -> np.ndarray:
            return np.stack([getattr(sums[layer], name).cpu().numpy()[:, keep] for layer in chosen])

        counts = count[keep]
        q_norm = k_norm = usage = None
        if self.planes is not None:
            n_tok = sums[chosen[0]].n_tokens
            q_norm = np.stack([sums[layer].q_norm.cpu().numpy() for layer in chosen]) / n_tok
            k_norm = np.stack([sums[layer].k_norm.cpu().numpy() for layer in chosen]) / n_tok
            product = q_norm * k_norm
            usage = product / product.sum(axis=-1, keepdims=True)
        loaded = self.loaded
        provenance = Provenance(
            model_id=loaded.model_id,
            kind="hidden",
            source=f"{loaded.model_id}: attention of {len(chosen)} block(s) of {loaded.blocks_path}",
            revision=loaded.revision,
            config={
                **run.config(),
                "layers": chosen,
                "max_offset": max_offset,
                **({"blocks without softmax attention (not read)": unseen} if unseen else {}),
            },
            original_dtype=dtype_name(next(loaded.module.parameters()).dtype),
            processing=("attention_by_offset",),
        )
        return AttentionByOffset(
            layers=chosen,
            offsets=offsets[keep].astype(np.int64),
            mean_probability=stack("prob") / counts,
            mean_logit=stack("logit") / counts,
            counts=counts.round().astype(np.int64),
            rotary_status=self.status,
            q_plane_norm=q_norm,
            k_plane_norm=k_norm,
            plane_usage=usage,
            wavelengths=wavelengths,
            n_sequences=run.corpus.n_sequences,
            seq_len=t,
            corpus=run.corpus.description,
            provenance=provenance,
        )


def attention_by_offset(
    model: Any,
    tokens: Any = None,
    *,
    layers: Sequence[int] | int | None = None,
    max_offset: int | None = None,
    batch_size: int | None = None,
    device: Device = "auto",
    **options: Unpack[RunOptions],
) -> AttentionByOffset:
    """Mean attention probability and pre-softmax logit versus offset for every head of ``layers``.

    Arguments as in :func:`pos_geometry.hidden_positions` (``options``:
    :class:`~pos_geometry.hidden.run.RunOptions`), except ``layers``: block indices in
    ``0..n_layers-1`` (default all). ``max_offset`` keeps ``|Δ| ≤ max_offset`` in the result (the
    sums are over every offset either way). The model runs its own projections, rotary embedding
    and mask; only the attention product is recomputed (see :mod:`pos_geometry.hidden.offsets`).
    ``hidden_positions(..., attention=True)`` measures this in the same pass as the hidden states.
    """
    check_max_offset(max_offset)
    run = start(model, tokens, batch_size=batch_size, device=device, options=options)
    collector = OffsetCollector(run.loaded, check_layers(layers, run.loaded.n_layers - 1))
    with collector.probing():
        run_batches(run, through_block=max(collector.blocks))
    return collector.result(run, max_offset)
