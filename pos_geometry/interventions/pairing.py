"""The pairing control: every rotation plane made to turn two dimensions that were never trained as a pair.

Within each head's ``rotary_dim`` rotated dimensions, the query and key rows are put in the order
``[0, r/2, 1, r/2+1, ...]`` (``r = rotary_dim``): for a rotate-half model (planes ``(i, i + r/2)``) the
planes now turn ``(0, 1)``, ``(r/2, r/2+1)``...; for an interleaved model (planes ``(2i, 2i+1)``) they
turn ``(i, i + r/2)``. Either way no plane keeps its trained pair. The same order is applied to the
query and the key rows, their biases and their per-head norm gains, so the unrotated ``q·k`` is
unchanged: only the rotation is wrong. This is how llama.cpp stores Llama's q/k rows; loading them
unconverted costs SmolLM2-135M about 2 nats on a fixed paragraph (``tests/hidden/test_real_smollm2.py``).

The rows are found from the model's attention layout (:mod:`pos_geometry.registry.architecture`: a
row of the layout table, else the layout transformers gives): separate ``q``/``k`` projections, or a
fused one whose query/key rows are picked per head.
"""

from __future__ import annotations

from typing import Any

import torch

from pos_geometry.errors import InvalidArgumentError, NotApplicableError
from pos_geometry.interventions.target import EditTarget

__all__ = ["swap_pairing", "interleave_order"]


def interleave_order(rotary_dim: int, head_dim: int) -> torch.Tensor:
    """``(head_dim,)`` long: one head's new row order (rotated dims interleaved, the rest in place)."""
    half = rotary_dim // 2
    order = torch.stack([torch.arange(half), torch.arange(half) + half], dim=1).reshape(-1)
    return torch.cat([order, torch.arange(rotary_dim, head_dim)])


def _parameters(target: EditTarget) -> dict[str, torch.Tensor]:
    return dict(target.loaded.module.named_parameters())


def _find(params: dict[str, torch.Tensor], key: str, prefix: str) -> tuple[str, torch.Tensor]:
    """The parameter named ``key`` in a model whose names may carry or lack ``prefix`` (a bare base model)."""
    bare = key.removeprefix(prefix)
    for name in (key, bare):
        if name in params:
            return name, params[name]
    hits = [name for name in params if name.endswith("." + bare)]
    if len(hits) == 1:
        return hits[0], params[hits[0]]
    raise NotApplicableError(f"the model has no parameter {key!r} (its attention layout names it).")


def _head_rows(n_heads: int, head_dim: int, start: int, stride: int) -> list[torch.Tensor]:
    return [torch.arange(head_dim) + start + h * stride for h in range(n_heads)]


def swap_pairing(target: EditTarget) -> None:
    """Reorder every layer's query/key rows (module docstring), recording the undo in ``target``."""
    from pos_geometry.registry.architecture import attention_of, describe_architecture
    from pos_geometry.sources.roles import head_counts

    config = target.loaded.config
    try:
        layout, derived = attention_of(config)
        if derived is not None:  # transformers' own sizes (every rope type it knows, partial rotary included)
            dims = {(derived.rotary_dim, derived.head_dim)}
        else:
            architecture = describe_architecture(config)
            dims = {
                (t.rotary.rotary_dim, t.rotary.head_dim)
                for t in architecture.layer_types
                if t.rotary is not None
            }
    except InvalidArgumentError as exc:
        raise NotApplicableError(f"the pairing swap needs the model's query/key rows: {exc}") from None
    if len(dims) != 1:
        raise NotApplicableError(
            f"the pairing swap reorders one head layout, but this model's layer types rotate {sorted(dims)} "
            "(rotary dims, head dims)."
        )
    rotary_dim, hd = dims.pop()
    if rotary_dim < 4:
        raise NotApplicableError(
            f"the pairing swap needs at least two rotation planes per head to pair differently; this model rotates "
            f"{rotary_dim} of each head's {hd} dimensions (one plane), so any reordering keeps its pair."
        )
    n_layers, n_heads, n_kv = head_counts(config)
    order = interleave_order(rotary_dim, hd)
    found = _parameters(target)
    unrotated = set(derived.unrotated) if derived is not None else set()  # NoPE or linear-attention layers
    for layer in range(n_layers):
        if layer in unrotated:
            continue
        if layout.latent is not None:
            _swap_latent(target, layout, layer, n_heads, order, found)
            continue
        keys = layout.keys(layer, norm=True)
        if "qkv" in keys:
            name, weight = _find(found, keys["qkv"], layout.prefix)
            if layout.fused == "per_head":  # rows [q_h, k_h, v_h] head after head
                q_rows = _head_rows(n_heads, hd, 0, 3 * hd)
                k_rows = _head_rows(n_heads, hd, hd, 3 * hd)
            else:  # "blocks": all q rows, then all k rows, then all v rows
                q_rows = _head_rows(n_heads, hd, 0, hd)
                k_rows = _head_rows(n_kv, hd, n_heads * hd, hd)
            tensors = [weight] + ([found[b]] if (b := name.removesuffix("weight") + "bias") in found else [])
            for tensor in tensors:
                for rows in (*q_rows, *k_rows):
                    target.permute_rows(tensor, rows, order)
            continue
        for role, count in (("q", n_heads), ("k", n_kv)):
            name, weight = _find(found, keys[role], layout.prefix)
            stride = 2 * hd if role == "q" and layout.q_gate else hd  # a gated query head: [query | gate]
            rows = torch.cat([torch.arange(hd) + h * stride for h in range(count)])
            full = torch.cat([order + h * hd for h in range(count)])  # indices into rows
            target.permute_rows(weight, rows, full)
            bias = name.removesuffix("weight") + "bias"
            if bias in found:
                target.permute_rows(found[bias], rows, full)
            norm_key = keys.get(f"{role}_norm")
            if norm_key is not None:
                _, gain = _find(found, norm_key, layout.prefix)
                per = (
                    order if gain.shape[0] == hd else full
                )  # one gain per head dim, or per row of every head
                target.permute_rows(gain, torch.arange(gain.shape[0]), per)


def _swap_latent(
    target: EditTarget,
    layout: Any,
    layer: int,
    n_heads: int,
    order: torch.Tensor,
    found: dict[str, torch.Tensor],
) -> None:
    """The swap in a multi-head latent attention layer: the rotary rows of each head in ``q_proj`` or
    ``q_b_proj``, and the shared rotary key's rows in ``kv_a_proj_with_mqa``, reordered alike."""
    latent = layout.latent
    keys = latent.keys(layer)
    _, q = _find(found, keys["q"] if "q" in keys else keys["q_b"], layout.prefix)
    for head_rows in latent.q_rows(n_heads):
        target.permute_rows(q, head_rows, order)
    _, kv_a = _find(found, keys["kv_a"], layout.prefix)
    target.permute_rows(kv_a, latent.k_rows(), order)
