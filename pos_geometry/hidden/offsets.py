"""Attention statistics by offset, gathered inside the model's own attention call.

transformers (v5) looks every attention computation up by name in ``AttentionInterface``.
:func:`probing` registers one more implementation, ``"pos_geometry_probe"``, and switches the
model to it for the duration of a run. It computes exactly what the eager implementation does
(``softmax(q kᵀ · scaling + mask) v``, softmax in float32, grouped-query heads expanded) and, on
the way, hands the layer's post-rotary queries and keys, its pre-softmax logits ``q kᵀ · scaling``,
its probabilities and its mask to an :class:`OffsetSums`. The mask is the one transformers builds
for eager attention (causal, sliding-window, bidirectional ...), so only the pairs the model may
attend to are counted. Models whose attention is not of that form (logit soft-capping, attention
sinks) are refused rather than misread.

Sums by offset ``Δ = query - key`` use the skew trick: flipping the key axis and padding each row
turns every diagonal of a ``T × T`` matrix into one column, so one ``sum`` gives all ``2T - 1``
diagonal sums.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pos_geometry.errors import NotApplicableError
from pos_geometry.hidden.running_sums import accumulator_device

__all__ = ["OffsetSums", "diagonal_sums", "probing", "PROBE_NAME"]

PROBE_NAME = "pos_geometry_probe"
_COLLECTORS: dict[int, Callable[..., None]] = {}  # id(attention module) -> collector, during a run


def diagonal_sums(a: torch.Tensor) -> torch.Tensor:
    """``(..., 2T-1)``: entry ``Δ + T - 1`` is ``Σ_i a[..., i, i - Δ]`` for ``a`` of shape ``(..., T, T)``."""
    t = a.shape[-1]
    flipped = torch.nn.functional.pad(a.flip(-1), (0, t))  # row i: a[i, T-1-j'] at column j', then T zeros
    skewed = flipped.flatten(-2)[..., : t * (2 * t - 1)].reshape(*a.shape[:-2], t, 2 * t - 1)
    return skewed.sum(dim=-2)


class OffsetSums:
    """Running sums of one layer's attention by offset, and (rotary) of its per-plane q/k norms.

    ``planes``: ``(n_planes, 2)`` head dimensions of each rotation plane, or None.
    """

    def __init__(self, planes: torch.Tensor | None = None) -> None:
        self.planes = planes
        self.prob: torch.Tensor | None = None  # (n_heads, 2T-1) float64
        self.logit: torch.Tensor | None = None
        self.count: torch.Tensor | None = None  # (2T-1,)
        self.q_norm: torch.Tensor | None = None  # (n_heads, n_planes)
        self.k_norm: torch.Tensor | None = None
        self.n_tokens = 0

    def update(
        self,
        logits: torch.Tensor,
        probs: torch.Tensor,
        allowed: torch.Tensor,
        q: torch.Tensor,
        k: torch.Tensor,
    ) -> None:
        """Fold in one batch: ``logits``/``probs`` ``(b, h, T, T)``, ``allowed`` ``(b, 1, T, T)`` bool,
        ``q`` and ``k`` ``(b, h, T, head_dim)`` (k already expanded to the query heads)."""
        b, h, t, _ = logits.shape
        acc = accumulator_device(logits.device)
        if self.prob is None:
            zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64, device=acc)  # noqa: E731
            self.prob, self.logit, self.count = zeros(h, 2 * t - 1), zeros(h, 2 * t - 1), zeros(2 * t - 1)
        f64 = lambda x: x.to(acc, torch.float64)  # noqa: E731
        for i in range(b):  # one context at a time: the skewed copy is (h, T, 2T) floats
            keep = allowed[i].expand(h, t, t)
            self.prob += f64(diagonal_sums(torch.where(keep, probs[i].float(), 0.0)))
            self.logit += f64(diagonal_sums(torch.where(keep, logits[i].float(), 0.0)))
            self.count += f64(diagonal_sums(allowed[i, 0].float()))
        if self.planes is not None:
            a, c = self.planes[:, 0].to(q.device), self.planes[:, 1].to(q.device)

            def plane_norms(x: torch.Tensor) -> torch.Tensor:
                x = x.float()
                return f64(torch.sqrt(x[..., a].square() + x[..., c].square()).sum(dim=(0, 2)))

            qn, kn = plane_norms(q), plane_norms(k)
            self.q_norm = qn if self.q_norm is None else self.q_norm + qn
            self.k_norm = kn if self.k_norm is None else self.k_norm + kn
            self.n_tokens += b * t


def _allowed(mask: torch.Tensor | None, b: int, t: int, device: torch.device) -> torch.Tensor:
    """``(b, 1, T, T)`` bool: the (query, key) pairs the mask lets through."""
    if mask is None:
        return torch.ones(b, 1, t, t, dtype=torch.bool, device=device)
    m = mask[..., :t, :t]
    keep = m if m.dtype == torch.bool else m == 0
    return keep.expand(b, 1, t, t) if keep.shape[1] == 1 else keep[:, :1].expand(b, 1, t, t)


def probe_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention (the same arithmetic) that also reports to the module's collector."""
    if kwargs.get("softcap") is not None or getattr(module, "sinks", None) is not None:
        raise NotApplicableError(
            f"{type(module).__name__} soft-caps its logits or has attention sinks; attention by offset reads "
            "plain softmax(q kᵀ) attention only."
        )
    n_rep = query.shape[1] // key.shape[1]
    if n_rep > 1:
        key = key.repeat_interleave(n_rep, dim=1)
        value = value.repeat_interleave(n_rep, dim=1)
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    logits = torch.matmul(query, key.transpose(-1, -2)) * scale
    weights = logits
    if attention_mask is not None:
        m = attention_mask[..., : key.shape[-2]]
        weights = (
            weights.masked_fill(~m, torch.finfo(weights.dtype).min) if m.dtype == torch.bool else weights + m
        )
    probs = torch.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    if dropout and module.training:
        probs = torch.nn.functional.dropout(probs, p=dropout, training=True)
    output = torch.matmul(probs, value).transpose(1, 2).contiguous()
    collector = _COLLECTORS.get(id(module))
    if collector is not None:
        b, _, t, _ = query.shape
        collector(logits, probs, _allowed(attention_mask, b, t, query.device), query, key)
    return output, probs


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    if PROBE_NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(PROBE_NAME, probe_attention)
        AttentionMaskInterface.register(PROBE_NAME, eager_mask)


@contextlib.contextmanager
def probing(module: Any, collectors: dict[Any, Callable[..., None]]) -> Iterator[None]:
    """Within the block, ``module`` runs :func:`probe_attention`; ``collectors`` maps attention
    submodules to their callbacks. The previous attention implementation is restored on exit."""
    _register()
    config = module.config
    previous = getattr(config, "_attn_implementation", None) or "eager"
    module.set_attn_implementation(PROBE_NAME)
    declined = getattr(config, "_attn_implementation", None) != PROBE_NAME  # transformers logs it, not raises
    if declined:
        raise NotApplicableError(
            f"attention by offset is read inside transformers' attention call (its AttentionInterface), and "
            f"{type(module).__name__} does not compute its attention through it, so its attention cannot be read. "
            "Pass attention=False (--no-attention) to read its hidden states alone."
        )
    _COLLECTORS.update({id(m): fn for m, fn in collectors.items()})
    try:
        yield
    finally:
        for m in collectors:
            _COLLECTORS.pop(id(m), None)
        module.set_attn_implementation(previous)
