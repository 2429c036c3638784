"""An attention layout's keys and offsets, checked against what transformers' own model computed.

Given the parts :func:`~pos_geometry.registry.derived_layout.derive_layout` found by name (the query/key
projections or the fused one, the q/k norms, or DeepSeek's latent projections) and what a small probe of
the model recorded in its first rotating layer (the attention input, the queries and keys before rotation),
the reading of ``W_q``/``W_k`` that the layout describes must reproduce the model's own queries and
keys (up to one scalar per token and head: the norms' RMS divisors). Which norm feeds attention, and whether
it multiplies by ``w`` or ``1 + w``, is read from the probe too. What fails is refused with the reason.
"""

from __future__ import annotations

from typing import Any

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.attention import AttentionLayout
from pos_geometry.registry.rotation_probe import (
    PROBE_LEN,
    heads_first,
)

__all__ = ["LayoutUnavailable", "layout_from", "latent_layout_from"]


class LayoutUnavailable(InvalidArgumentError):
    """transformers cannot tell pos_geometry how this architecture's queries and keys are laid out (the
    message says which step failed)."""


def _norm_offset(norm: Any, x: Any) -> float | None:
    """0 when ``norm`` multiplies by its weight, 1 when by ``1 + weight`` (weight set to 0 to tell), else None."""
    import torch

    with torch.no_grad():
        saved = norm.weight.detach().clone()
        norm.weight.zero_()
        out = norm(x)
        norm.weight.copy_(saved)
    if torch.allclose(out, torch.zeros_like(out)):
        return 0.0
    return 1.0 if out.abs().max() > 0 else None


def _input_norm(probe: Any, block: Any, blocks_path: str, x: Any) -> tuple[str | None, float]:
    """``(key, offset)`` of the block's norm whose output is the attention input ``x`` (None when none is)."""
    import torch

    block_input = {}

    def grab(mod: Any, args: tuple, kwargs: dict) -> None:
        block_input.setdefault("x", (args[0] if args else kwargs.get("hidden_states")).detach())

    h = block.register_forward_pre_hook(grab, with_kwargs=True)
    with torch.no_grad():
        probe(torch.arange(2, 2 + PROBE_LEN)[None])
    h.remove()
    for name, child in block.named_children():
        if "norm" in type(child).__name__.lower() and hasattr(child, "weight") and "x" in block_input:
            with torch.no_grad():
                if torch.allclose(child(block_input["x"]), x, rtol=0, atol=1e-5 * float(x.abs().max())):
                    return f"{blocks_path}.{{layer}}.{name}.weight", _norm_offset(child, x) or 0.0
    return None, 0.0


def latent_layout_from(model_type, blocks_path, attn_path, children, pairing, probe, p_blocks, per_layer, inputs,
                   probe_cfg) -> AttentionLayout:  # fmt: skip
    """The layout of an MLA architecture (``registry.latent_layout``), checked against the rotary queries
    and keys the probe's first rotating layer computed: the shared key exactly, each head's query up to
    one scalar per token (the latent norm's RMS divisor)."""
    import torch

    from pos_geometry.registry.latent_layout import LatentLayout, latent_rows

    prefix = f"{blocks_path}.{{layer}}.{attn_path}."
    first = min(per_layer)
    p_attn = p_blocks[first].get_submodule(attn_path)
    x = inputs.get(first)
    if x is None:
        raise LayoutUnavailable(f"the {model_type} attention input could not be observed.")
    if any(getattr(p_attn.get_submodule(n), "bias", None) is not None for n in children.values()):
        raise LayoutUnavailable(
            f"{model_type}'s latent projections add biases (attention_bias): the query's passes through the "
            "latent RMSNorm, so its rotary part is not a fixed linear map of the input."
        )
    names = {f"{role}_key": prefix + child + ".weight" for role, child in children.items()}
    offset = 0.0
    if "q_a_norm" in children:
        offset = (
            _norm_offset(p_attn.get_submodule(children["q_a_norm"]), torch.randn(3, probe_cfg.q_lora_rank))
            or 0.0
        )
    latent = LatentLayout(
        kv_a_key=names["kv_a_key"], q_key=names.get("q_key"), q_a_key=names.get("q_a_key"),
        q_a_norm_key=names.get("q_a_norm_key"), q_b_key=names.get("q_b_key"), q_a_norm_offset=offset,
        nope=probe_cfg.qk_nope_head_dim, rope=probe_cfg.qk_rope_head_dim, kv_lora=probe_cfg.kv_lora_rank,
    )  # fmt: skip
    state = {k: v.detach() for k, v in probe.state_dict().items()}
    heads = probe_cfg.num_attention_heads
    q, k, _ = latent_rows(latent, lambda key: state[key], first, heads)
    seen_q, seen_k = (heads_first(t, n, PROBE_LEN).double() for t, n in ((per_layer[first][0], heads),
                                                                         (per_layer[first][1], 1)))  # fmt: skip
    ours_q = torch.einsum("hjd,sd->hsj", q.double(), x[0].double())
    ours_k = torch.einsum("hjd,sd->hsj", k.double(), x[0].double())
    scale = (seen_q * ours_q).sum(-1, keepdim=True) / ours_q.square().sum(-1, keepdim=True).clamp_min(1e-300)
    per_token = torch.allclose(
        scale, scale[:1].expand_as(scale), rtol=1e-4, atol=0
    )  # the same for every head
    ok = per_token and torch.allclose(ours_q * scale, seen_q, rtol=0, atol=1e-4 * float(seen_q.abs().max()))
    ok = ok and torch.allclose(ours_k, seen_k, rtol=0, atol=1e-4 * float(seen_k.abs().max()) + 1e-12)
    if not ok:
        raise LayoutUnavailable(
            f"reading {model_type}'s latent projections as DeepSeek's MLA does not reproduce the rotary queries and "
            "keys it rotates."
        )
    norm_key, norm_offset = _input_norm(probe, p_blocks[first], blocks_path, x)
    fields: dict[str, Any] = {
        "pairing": pairing,
        "prefix": blocks_path.split(".")[0] + "." if "." in blocks_path else "",
    }
    if norm_key is not None:
        fields.update(norm_key=norm_key, norm_offset=norm_offset)
    return AttentionLayout(model_type=model_type, latent=latent, **fields)


def layout_from(model_type, blocks_path, attn_path, q, k, qkv, q_norm, k_norm, pairing, probe, p_blocks, attn,
                 per_layer, inputs, probe_cfg) -> AttentionLayout:  # fmt: skip
    """The layout's keys and offsets, checked against what the probe's first rotating layer computed."""
    import torch

    prefix = f"{blocks_path}.{{layer}}.{attn_path}."
    first = min(per_layer)
    block = p_blocks[first]
    p_attn = block.get_submodule(attn_path)
    x = inputs.get(first)
    if x is None:
        raise LayoutUnavailable(f"the {model_type} attention input could not be observed.")
    norm_key, norm_offset = _input_norm(probe, block, blocks_path, x)
    heads = probe_cfg.num_attention_heads
    kv = getattr(probe_cfg, "num_key_value_heads", None) or heads
    head_dim = probe_cfg.head_dim
    q_pre, k_pre = (
        heads_first(t, h_, PROBE_LEN) for t, h_ in ((per_layer[first][0], heads), (per_layer[first][1], kv))
    )
    qk_offset = 0.0
    gains = {}
    for which, name, n in (("q", q_norm, heads), ("k", k_norm, kv)):
        if name is not None:
            module = p_attn.get_submodule(name)
            qk_offset = _norm_offset(module, torch.randn(3, module.weight.numel())) or 0.0
            gains[which] = (
                (module.weight.detach().double() + qk_offset).reshape(-1, head_dim).expand(n, head_dim)
            )
    fields: dict[str, Any] = {
        "pairing": pairing,
        "prefix": blocks_path.split(".")[0] + "." if "." in blocks_path else "",
    }
    if q and k:
        rows = (p_attn.get_submodule(q).weight.shape[0], p_attn.get_submodule(k).weight.shape[0])
        gated = rows == (2 * heads * head_dim, kv * head_dim)  # [query | gate] per head (Qwen3-Next)
        if rows != (heads * head_dim, kv * head_dim) and not gated:
            raise LayoutUnavailable(
                f"{model_type}'s {q}/{k} have {rows[0]}/{rows[1]} rows, neither heads x head_dim "
                f"({heads * head_dim}/{kv * head_dim}) nor a query and a gate per head ({2 * heads * head_dim}/"
                f"{kv * head_dim})."
            )
        wq = p_attn.get_submodule(q).weight.detach().double()
        bq = p_attn.get_submodule(q).bias
        if gated:  # the query half of each head's rows; the check below must confirm it
            wq = wq.reshape(heads, 2, head_dim, -1)[:, 0]
            bq = None if bq is None else bq.detach().reshape(heads, 2, head_dim)[:, 0].reshape(-1)
            fields["q_gate"] = True
        wq = wq.reshape(heads, head_dim, -1)
        wk = p_attn.get_submodule(k).weight.detach().double().reshape(kv, head_dim, -1)
        fields.update(q_key=prefix + q + ".weight", k_key=prefix + k + ".weight")
        candidates = {"separate": (wq, wk, bq, p_attn.get_submodule(k).bias)}
    else:
        w = p_attn.get_submodule(qkv).weight.detach().double()
        b = p_attn.get_submodule(qkv).bias
        fields.update(qkv_key=prefix + qkv + ".weight")
        candidates = {}
        if kv == heads and w.shape[0] == 3 * heads * head_dim:
            per_head = w.reshape(heads, 3, head_dim, -1)
            bias = None if b is None else b.detach().double().reshape(heads, 3, head_dim)
            candidates["per_head"] = (per_head[:, 0], per_head[:, 1], None if bias is None else bias[:, 0].reshape(-1),
                                      None if bias is None else bias[:, 1].reshape(-1))  # fmt: skip
        qr = heads * head_dim
        blocks_b = None if b is None else b.detach().double()
        candidates["blocks"] = (w[:qr].reshape(heads, head_dim, -1), w[qr : qr + kv * head_dim].reshape(kv, head_dim, -1),
                                None if blocks_b is None else blocks_b[:qr], None if blocks_b is None else blocks_b[qr : qr + kv * head_dim])  # fmt: skip
    # which rotated tensor is the query is not known from the call order (GPT-J rotates keys first): try both
    orders = [(q_pre, k_pre)] + ([(k_pre, q_pre)] if heads == kv else [])
    for kind, (wq, wk, bq, bk), (seen_q, seen_k) in (
        (kind, c, order) for kind, c in candidates.items() for order in orders
    ):
        ok = True
        for which, weight, bias, seen in (("q", wq, bq, seen_q), ("k", wk, bk, seen_k)):
            ours = torch.einsum("hjd,sd->hsj", weight, x[0].double())
            if bias is not None:
                ours = ours + bias.detach().double().reshape(weight.shape[0], 1, head_dim)
            if which in gains:  # a q/k norm: its gain per row, its RMS divisor one scalar per token and head
                ours = ours * gains[which][:, None, :]
            ours = ours[..., : seen.shape[-1]]  # GPT-J passes only the rotating slice
            seen = seen.double()
            if which in gains:  # scale ours to the model's per-(head, token) norm, then compare
                scale = (seen * ours).sum(-1, keepdim=True) / ours.square().sum(-1, keepdim=True).clamp_min(
                    1e-300
                )
                ours = ours * scale
            ok &= bool(torch.allclose(ours, seen, rtol=0, atol=1e-4 * float(seen.abs().max()) + 1e-12))
        if ok:
            if kind != "separate":
                fields["fused"] = kind
            break
    else:
        raise LayoutUnavailable(
            f"reading {model_type}'s query/key weights as laid out does not reproduce the queries and keys it rotates."
        )
    if norm_key is not None:
        fields.update(norm_key=norm_key, norm_offset=norm_offset)
    if q_norm and k_norm:
        fields.update(q_norm_key=prefix + q_norm + ".weight", k_norm_key=prefix + k_norm + ".weight",
                      qk_norm_offset=qk_offset)  # fmt: skip
    return AttentionLayout(model_type=model_type, **fields)
