"""Probing a tiny instance of a transformers architecture: how its own code rotates queries and keys.

Used by :mod:`pos_geometry.registry.derived_layout`. A probe instance keeps the layer count, head
size and rope parameters of the real config (so transformers computes the real frequencies) and
shrinks everything else; a spy on the modeling module's rotation function records, per call, the
tensors rotated, the rotated result, and the angles (cos/sin, or complex frequencies).
"""

from __future__ import annotations

from typing import Any

from pos_geometry.errors import InvalidArgumentError

__all__ = [
    "ROTATIONS",
    "PROBE_LEN",
    "ProbeError",
    "shrunk",
    "spy",
    "rotation_calls",
    "frequencies",
    "rotate",
    "heads_first",
]


class ProbeError(InvalidArgumentError):
    """The probe could not observe what it needs (the message says what)."""


ROTATIONS = ("apply_rotary_pos_emb", "apply_rotary_emb", "apply_rotary_pos_emb_interleave")
_SHRINK = {  # width fields of a probe instance (only those the config has are set)
    "intermediate_size": 32,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "ffn_hidden_size": 32,
    "num_experts": 2,
    "num_local_experts": 2,
    "n_routed_experts": 2,
    "num_experts_per_tok": 1,
    "n_group": 1,
    "topk_group": 1,
    "vocab_size": 128,
}
PROBE_LEN = 8


def shrunk(cfg: Any) -> Any:
    """A copy of ``cfg`` with two heads (one key head under GQA), narrow MLPs and a small vocabulary, the same
    layer count, head size and rope parameters (so transformers computes the real frequencies)."""
    import copy

    probe = copy.deepcopy(cfg)
    heads = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    probe.num_attention_heads = 2
    if hasattr(cfg, "num_key_value_heads"):
        probe.num_key_value_heads = 1 if kv < heads else 2
    probe.head_dim = head_dim
    probe.hidden_size = 2 * head_dim
    for name, value in _SHRINK.items():
        if isinstance(getattr(cfg, name, None), int):
            setattr(probe, name, value)
    routed = any(
        isinstance(getattr(cfg, n, None), int)
        for n in ("n_routed_experts", "num_experts", "num_local_experts")
    )
    if routed and hasattr(cfg, "num_experts_per_tok") and cfg.num_experts_per_tok is None:
        probe.num_experts_per_tok = (
            1  # a default config may leave the router's k unset; attention does not care
        )
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(probe, name, None), int) and getattr(probe, name) >= 128:
            setattr(probe, name, 0)
    probe._attn_implementation = "eager"
    return probe


def spy(module: Any, name: str, calls: list, current: list) -> Any:
    original = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        calls.append((current[0], args, kwargs, out))
        return out

    return original, spy


def rotation_calls(args: tuple, kwargs: dict, out: Any) -> list[tuple[Any, Any, Any, Any]]:
    """``[(x, rotated x, cos, sin)]`` of one call of a rotation function: the queries and keys it rotated
    (one or both), and its angles as cos/sin (sin is the one that vanishes at position 0) or, for
    complex frequencies, ``(freqs, None)``."""
    import torch

    named = [
        kwargs[k] for k in ("q", "k", "cos", "sin", "freqs_cis") if isinstance(kwargs.get(k), torch.Tensor)
    ]
    tensors = [a for a in args if isinstance(a, torch.Tensor)] + named
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, torch.Tensor)]
    complex_ = [t for t in tensors if t.is_complex()]
    if complex_:
        xs = [t for t in tensors if not t.is_complex()][: len(outs)]
        return [(x, o, complex_[0], None) for x, o in zip(xs, outs, strict=False)]
    if len(tensors) < 3 or len(outs) > len(tensors) - 2:
        return []
    xs, angles = tensors[: len(outs)], tensors[len(outs) : len(outs) + 2]
    first = [by_position(a)[0] for a in angles]
    cos, sin = angles if first[1].abs().max() <= first[0].abs().max() else angles[::-1]
    return [(x, o, cos, sin) for x, o in zip(xs, outs, strict=True)]


def by_position(t: Any) -> Any:
    """``t`` as ``(positions, last)``: the axis of length ``PROBE_LEN`` (the last such before the final one)
    kept, every other leading axis taken at index 0."""
    axes = [i for i, n in enumerate(t.shape[:-1]) if n == PROBE_LEN]
    if not axes:
        raise ProbeError(f"the rotation angles have shape {tuple(t.shape)}, with no axis of positions.")
    index = tuple(slice(None) if i == axes[-1] else 0 for i in range(t.dim() - 1))
    return t[index]


def frequencies(cos: Any, sin: Any) -> tuple[list[float], float, str]:
    """``(θ, attention factor, cos layout)`` from transformers' cos/sin (or complex frequencies)."""
    import torch

    if sin is None:  # complex: (positions, n_planes), interleaved pairs by construction
        rows = by_position(cos).to(torch.complex128)
        return torch.angle(rows[1]).tolist(), float(rows[0].abs()[0]), "interleaved"
    c, s = by_position(cos).double(), by_position(sin).double()
    angles, scale = torch.atan2(s[1], c[1]), float(c[0, 0])
    half = angles.shape[0] // 2
    if torch.allclose(angles[:half], angles[half:], rtol=1e-5, atol=1e-7):
        return angles[:half].tolist(), scale, "halves"
    if torch.allclose(angles[0::2], angles[1::2], rtol=1e-5, atol=1e-7):
        return angles[0::2].tolist(), scale, "interleaved"
    return angles.tolist(), scale, "single"  # one angle per plane (GPT-J repeats them inside the function)


def rotate(x: Any, theta: Any, pairing: str, scale: float, positions: Any) -> Any:
    """``x`` ``(..., seq, ≥ rot)`` rotated by ``p θ_i`` at each position with ``pairing`` (what the model should do)."""
    import torch

    rot = 2 * theta.shape[0]
    angles = positions[:, None].double() * theta[None, :]
    c, s = torch.cos(angles) * scale, torch.sin(angles) * scale
    out = x.double().clone()
    if pairing == "rotate_half":
        a, b = x[..., : rot // 2].double(), x[..., rot // 2 : rot].double()
        out[..., : rot // 2], out[..., rot // 2 : rot] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., 0:rot:2].double(), x[..., 1:rot:2].double()
        out[..., 0:rot:2], out[..., 1:rot:2] = a * c - b * s, b * c + a * s
    return out


def heads_first(t: Any, n_heads: int, seq: int) -> Any:
    """A query/key tensor as ``(heads, seq, dim)`` whether it came ``(b, heads, seq, d)`` or ``(b, seq, heads, d)``."""
    t = t[0]
    return t if t.shape[0] == n_heads and t.shape[1] == seq else t.transpose(0, 1)
