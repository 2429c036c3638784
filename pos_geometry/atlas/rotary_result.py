"""The rotary atlas's result: per layer × head × rotation plane statistics, with their summaries and provenance."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pos_geometry.analysis._results import Result
from pos_geometry.atlas.plane_statistics import span_critical
from pos_geometry.embedding import Provenance

__all__ = ["RotaryAtlas"]


@dataclass(frozen=True, eq=False, repr=False)
class RotaryAtlas(Result):
    """Per layer × head × rotation plane statistics of a rotary model's query/key weights.

    Attributes:
        q_norm, k_norm: ``(n_layers, n_heads, n_planes)`` Frobenius norms of the plane's 2 rows.
        qk_share: ``(n_layers, n_heads, n_planes)`` the plane's share of the head's QK form (rows sum to 1).
        q_pair_cosine, k_pair_cosine: ``(n_layers, n_heads, n_planes)`` cosine between the plane's 2 rows.
        wavelengths: ``(n_planes,)`` ``2π/θ_i`` in positions (scaled frequencies for scaled rope types).
        critical: ``(n_planes,)`` bool, the plane completes a cycle within the layers' attention span
            (``context_length``, or the sliding window when every layer read slides; see ``spans``).
        short_share: ``(n_layers, n_heads)`` summed ``qk_share`` of the planes that complete a cycle within
            that layer's span (:attr:`layer_critical`); the rest is long-range.
        layer_usage: ``(n_layers, n_planes)`` mean ``qk_share`` over the heads of each layer.
        layers: the layer indices, in order.
        kv_heads: ``(n_heads,)`` the key head each query head reads.
        context_length: the training context ``T`` (``original_max_position_embeddings`` when set).
        critical_dimension: ``2 × (number of critical planes)``: Liu et al.'s critical dimension, for the span
            of ``critical``.
        fold_norm: whether the norm gain was folded into the weights.
        pairing: ``"rotate_half"`` or ``"interleaved"``.
        provenance: model, revision, commit, checkpoint keys, rotary config.
        layer_type: the layer type whose layers were read when a model rotates its layer types with
            different frequencies (Gemma-2/3 ``"sliding_attention"``/``"full_attention"``), else None.
        unrotated_layers: requested layers whose attention does not rotate at all (Llama-4's NoPE
            layers): they have no planes and are left out of the arrays.
        spans: per layer of ``layers``, the largest query-key offset its attention sees: the training
            context, or its sliding window (Gemma-2/3's local layers, Mistral); empty: every layer sees
            ``context_length``.
        includes: what the plane shares are of: ``"weights and q/k biases"`` (the biases as an
            always-on input, :mod:`~pos_geometry.atlas.plane_biases`), or the weights alone (the
            model has no biases, or ``biases=False``).
        term_share: ``(n_layers, n_heads, 4)`` each head's expected squared QK logit split into
            :data:`~pos_geometry.atlas.plane_biases.TERMS` (weights, query bias, key bias, constant),
            or None when biases are not included.
    """

    q_norm: torch.Tensor
    k_norm: torch.Tensor
    qk_share: torch.Tensor
    q_pair_cosine: torch.Tensor
    k_pair_cosine: torch.Tensor
    wavelengths: torch.Tensor
    critical: torch.Tensor
    short_share: torch.Tensor
    layer_usage: torch.Tensor
    layers: tuple[int, ...]
    kv_heads: tuple[int, ...]
    context_length: int
    critical_dimension: int
    fold_norm: bool
    pairing: str
    provenance: Provenance
    layer_type: str | None = None
    unrotated_layers: tuple[int, ...] = ()
    spans: tuple[int, ...] = ()
    includes: str = "weights"
    term_share: torch.Tensor | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(n_layers, n_heads, n_planes)``."""
        return tuple(self.qk_share.shape)  # type: ignore[return-value]

    @property
    def layer_critical(self) -> torch.Tensor:
        """``(n_layers, n_planes)`` bool: the plane completes a cycle within that layer's span."""
        return span_critical(self.wavelengths, self.spans or (self.context_length,) * self.qk_share.shape[0])

    @property
    def layer_short_share(self) -> torch.Tensor:
        """``(n_layers,)`` the share of each layer's QK form in its short-wavelength (critical) planes,
        averaged over heads; ``1 - layer_short_share`` is held by the long-wavelength planes."""
        return (self.layer_usage * self.layer_critical).sum(-1)

    @property
    def dominant_plane(self) -> torch.Tensor:
        """``(n_layers, n_heads)`` long: the plane with the largest ``qk_share`` in each head."""
        return self.qk_share.argmax(dim=-1)

    def summary_rows(self) -> list[tuple[str, str]]:
        n_layers, n_heads, n_planes = self.shape
        n_crit = int(self.critical.sum())
        short = self.short_share
        usage = self.layer_usage.mean(dim=0)
        top = torch.argsort(usage, descending=True)[:3].tolist()
        return [
            ("layers × heads × planes", f"{n_layers} × {n_heads} × {n_planes}"),
            ("pairing", self.pairing + (", norm gain folded" if self.fold_norm else "")),
            ("shares of", self.includes),
            *(
                [
                    (
                        "QK form: weights / q bias / k bias / constant",
                        " / ".join(f"{v:.3f}" for v in self.term_share.mean(dim=(0, 1)).tolist()),
                    )
                ]
                if self.term_share is not None
                else []
            ),
            *([("layer type", str(self.layer_type))] if self.layer_type else []),
            *(
                [("layers with no rotation (left out)", ", ".join(map(str, self.unrotated_layers)))]
                if self.unrotated_layers
                else []
            ),
            ("wavelengths", f"{self.wavelengths.min():.3g} .. {self.wavelengths.max():.4g} positions"),
            (
                "training context",
                f"{self.context_length} ({n_crit} planes complete a cycle in {self._span_words()})",
            ),
            ("critical dimension", str(self.critical_dimension)),
            (
                "share in short-wavelength planes",
                f"mean {short.mean():.3f} (heads from {short.min():.3f} to {short.max():.3f})",
            ),
            (
                "most used planes",
                ", ".join(f"{i} (λ={self.wavelengths[i]:.4g}, {usage[i]:.3f})" for i in top),
            ),
        ]

    def _span_words(self) -> str:
        spans = set(self.spans) or {self.context_length}
        if spans == {self.context_length}:
            return "it"
        if len(spans) == 1:
            return f"the sliding window of {spans.pop()}"
        return f"it; layers with a window of {min(spans)} count their own"
