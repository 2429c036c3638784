"""Multi-head latent attention (DeepSeek-V2/V3 and kin): the rotary part of its queries and keys as linear maps.

An MLA head's query is ``q = W_qb · RMSNorm_a(W_qa x)`` (or ``W_q x`` without a query LoRA), split per
head into a part that never rotates (``qk_nope_head_dim``) and a rotary part (``qk_rope_head_dim``); its
key's rotary part is ``k_rot = W_kva[kv_lora_rank : kv_lora_rank + rope] x``, one key shared by every
head (the rest of ``W_kva x`` is the compressed key/value latent, which never rotates). The latent
norm's RMS divisor is one scalar per token, the same for every head, so it cancels in every share of
the rotary atlas (as a q/k norm's does); its gain is part of the map. So each head's rotary query rows
are the fixed matrix ``W_qb[rope rows of h] · diag(g_a) · W_qa`` ``(rope, d_model)``, and the key's are
``W_kva``'s rope rows: the atlas reads them like any other projection, with one key head.

:class:`LatentLayout` names the tensors; :func:`latent_rows` forms those matrices from them;
:func:`latent_children` finds the parts in a transformers attention module (by DeepSeek's names).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where it is used: the model table's command never imports it
    import torch

__all__ = ["LatentLayout", "latent_children", "latent_rows"]

_Q_A, _Q_A_NORM, _Q_B, _Q, _KV_A = "q_a_proj", "q_a_layernorm", "q_b_proj", "q_proj", "kv_a_proj_with_mqa"


@dataclass(frozen=True)
class LatentLayout:
    """Where an MLA layer keeps its rotary query/key parts (``{layer}`` in each key is the layer index).

    Attributes:
        kv_a_key: ``kv_a_proj_with_mqa.weight`` ``(kv_lora_rank + rope, d_model)``.
        q_key: ``q_proj.weight`` ``(n_heads · (nope + rope), d_model)`` when there is no query LoRA, else None.
        q_a_key, q_a_norm_key, q_b_key: the query LoRA: ``q_a_proj.weight`` ``(q_lora_rank, d_model)``, its
            RMSNorm's gain ``(q_lora_rank,)`` and ``q_b_proj.weight`` ``(n_heads · (nope + rope), q_lora_rank)``.
        q_a_norm_offset: added to that gain (0: the norm multiplies by ``w``).
        nope, rope, kv_lora: ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``kv_lora_rank``.
    """

    kv_a_key: str
    nope: int
    rope: int
    kv_lora: int
    q_key: str | None = None
    q_a_key: str | None = None
    q_a_norm_key: str | None = None
    q_b_key: str | None = None
    q_a_norm_offset: float = 0.0

    def keys(self, layer: int) -> dict[str, str]:
        """Role -> checkpoint key of ``layer`` (``"kv_a"``, and ``"q"`` or ``"q_a"``, ``"q_a_norm"``, ``"q_b"``)."""
        roles = {"kv_a": self.kv_a_key, "q": self.q_key, "q_a": self.q_a_key, "q_a_norm": self.q_a_norm_key,
                 "q_b": self.q_b_key}  # fmt: skip
        return {role: key.format(layer=layer) for role, key in roles.items() if key is not None}

    def q_rows(self, n_heads: int) -> torch.Tensor:
        """``(n_heads, rope)`` the rows of ``q_proj``/``q_b_proj`` that are each head's rotary query part."""
        import torch

        per = self.nope + self.rope
        return torch.arange(n_heads)[:, None] * per + self.nope + torch.arange(self.rope)[None, :]

    def k_rows(self) -> torch.Tensor:
        """``(rope,)`` the rows of ``kv_a_proj_with_mqa`` that are the shared rotary key."""
        import torch

        return self.kv_lora + torch.arange(self.rope)


def latent_children(attn: Any) -> dict[str, str] | None:
    """``{"kv_a", "q" or ("q_a", "q_a_norm", "q_b")}`` -> child name, when ``attn`` is an MLA module by
    DeepSeek's names; None otherwise."""
    children = dict(attn.named_children())
    if _KV_A not in children:
        return None
    if all(n in children for n in (_Q_A, _Q_A_NORM, _Q_B)):
        return {"kv_a": _KV_A, "q_a": _Q_A, "q_a_norm": _Q_A_NORM, "q_b": _Q_B}
    if _Q in children and getattr(children[_Q], "weight", None) is not None:
        return {"kv_a": _KV_A, "q": _Q}
    return None


def latent_rows(
    latent: LatentLayout, read: Callable[[str], torch.Tensor], layer: int, n_heads: int
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """``(q, k, keys)``: layer ``layer``'s rotary query rows ``(n_heads, rope, d_model)`` and the shared key's
    ``(1, rope, d_model)``, float32, formed from the tensors ``read(key)`` returns (module docstring)."""
    keys = latent.keys(layer)
    kv_a = _shaped(read(keys["kv_a"]), keys["kv_a"], rows=latent.kv_lora + latent.rope)
    d_model = kv_a.shape[1]
    k = kv_a[latent.k_rows()].unsqueeze(0)
    rows = latent.q_rows(n_heads).reshape(-1)
    per_heads = n_heads * (latent.nope + latent.rope)
    if "q" in keys:
        q = _shaped(read(keys["q"]), keys["q"], rows=per_heads, cols=d_model)[rows]
        return q.reshape(n_heads, latent.rope, -1), k, [keys["q"], keys["kv_a"]]
    q_a = _shaped(read(keys["q_a"]), keys["q_a"], cols=d_model)
    gain = _shaped(read(keys["q_a_norm"]), keys["q_a_norm"], size=q_a.shape[0]) + latent.q_a_norm_offset
    q_b = _shaped(read(keys["q_b"]), keys["q_b"], rows=per_heads, cols=q_a.shape[0])[rows]
    q = ((q_b * gain) @ q_a).reshape(
        n_heads, latent.rope, -1
    )  # (n_heads · rope, q_lora) · diag(g) · (q_lora, d)
    return q, k, [keys["q_a"], keys["q_a_norm"], keys["q_b"], keys["kv_a"]]


def _shaped(
    tensor: torch.Tensor, key: str, rows: int | None = None, cols: int | None = None, size: int | None = None
) -> torch.Tensor:
    """``tensor`` as float32 after checking its shape against the config's dimensions."""
    from pos_geometry.errors import CheckpointFormatError

    shape = tuple(tensor.shape)
    if size is not None:
        bad = shape != (size,)
        want = f"({size},)"
    else:
        bad = (
            len(shape) != 2
            or (rows is not None and shape[0] != rows)
            or (cols is not None and shape[1] != cols)
        )
        want = f"({rows if rows is not None else 'any'}, {cols if cols is not None else 'd_model'})"
    if bad:
        raise CheckpointFormatError(
            f"{key!r} has shape {shape}; the config implies {want}. The checkpoint and its config.json disagree."
        )
    return tensor.float()
