"""Where each architecture keeps its attention weights: the layout table, keyed by ``model_type``.

A rotary model's position lives in how its query and key projections use each rotation
plane, so reading position from the weights means reading those projections. Every
architecture stores them differently; each row here says how, as plain data:

* ``q_key`` / ``k_key``: the per-layer projection weights (``{layer}`` is the layer index), or
  ``qkv_key`` for a fused projection, with ``fused`` naming how its rows interleave:
  ``"per_head"`` (GPT-NeoX/Pythia: rows ``[q_h, k_h, v_h]`` head after head) or ``"blocks"``
  (Phi-3: all query rows, then all key rows, then all value rows).
* ``norm_key``: the gain of the norm that feeds attention (it multiplies every input column of
  W_q and W_k); ``norm_offset`` is added to it first (Gemma stores ``gain - 1``). None when the
  attention input is not normed (OLMo-2 norms after attention).
* ``q_norm_key`` / ``k_norm_key``: per-head query/key norms applied after the projection and before
  the rotation (Qwen3, Gemma-3: RMSNorm over each head's ``head_dim``; OLMo-2: over all heads at
  once). Their RMS divisor is one scalar per token and head (or per token), so it cancels in every
  share; their gain scales each row of W_q/W_k, which ``fold_norm`` folds in exactly.
  ``qk_norm_offset`` is added to those gains first (Gemma-3's ``1 + w``).
* ``pairing``: which two dimensions of a head one rotation plane turns: ``"rotate_half"``
  (NeoX/Llama: dims ``i`` and ``i + rotary_dim/2``) or ``"interleaved"`` (GPT-J: ``2i`` and ``2i+1``).
* ``q_gate``: the query projection also produces a per-head output gate (Qwen3-Next, Qwen3.5): each
  head's ``2 · head_dim`` rows are ``[query | gate]``, so head ``h``'s query rows start at
  ``2 · h · head_dim``; the gate rows take no part in the QK form.
* ``latent``: multi-head latent attention (DeepSeek-V2/V3): the rotary parts of its queries and keys
  are products of its low-rank projections (:class:`~pos_geometry.registry.latent_layout.LatentLayout`);
  then ``q_key``/``k_key``/``qkv_key`` are None.
* ``prefix``: the leading name component a bare (headless) checkpoint omits
  (``model.``, ``gpt_neox.``, ``transformer.``).

Every path reads the layout transformers gives first
(:func:`~pos_geometry.registry.architecture.attention_of`, derived by
:mod:`pos_geometry.registry.derived_layout`); these rows are its test oracle (a test derives each one and
compares them field by field) and stand in only where transformers cannot describe the model. A new
architecture needs no row. Models whose queries or keys pass through something other than a linear map
and a norm before the rotation (CodeGen's model-parallel fused layout) are deliberately absent: the atlas
would misread them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.latent_layout import LatentLayout

__all__ = [
    "AttentionLayout",
    "ATTENTION_LAYOUTS",
    "attention_layout",
    "PAIRINGS",
    "FUSED_LAYOUTS",
    "TABLE_QK_LAYOUTS",
    "TableQKLayout",
    "table_qk_layout",
]

Pairing = Literal["rotate_half", "interleaved"]
PAIRINGS: tuple[str, ...] = ("rotate_half", "interleaved")
FUSED_LAYOUTS: tuple[str, ...] = ("per_head", "blocks")

_LLAMA = {
    "q_key": "model.layers.{layer}.self_attn.q_proj.weight",
    "k_key": "model.layers.{layer}.self_attn.k_proj.weight",
    "norm_key": "model.layers.{layer}.input_layernorm.weight",
    "pairing": "rotate_half",
    "prefix": "model.",
}

#: model_type -> layout fields (see the module docstring). Checked against transformers 5.23's
#: modeling files: GPTNeoXAttention views the fused output as (heads, 3 * head_size) and chunks it
#: into q, k, v; Phi3Attention slices qkv_proj's output as [q | k | v]; GPT-J rotates every two dims.
ATTENTION_LAYOUTS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "mixtral": _LLAMA,
    "qwen2": _LLAMA,
    "qwen2_moe": _LLAMA,
    "granite": _LLAMA,
    "starcoder2": _LLAMA,
    "gemma": {**_LLAMA, "norm_offset": 1.0},
    "qwen3": {
        **_LLAMA,
        "q_norm_key": "model.layers.{layer}.self_attn.q_norm.weight",
        "k_norm_key": "model.layers.{layer}.self_attn.k_norm.weight",
    },
    "olmo2": {
        **_LLAMA,
        "norm_key": None,  # post-norm blocks: attention reads the raw residual stream
        "q_norm_key": "model.layers.{layer}.self_attn.q_norm.weight",
        "k_norm_key": "model.layers.{layer}.self_attn.k_norm.weight",
    },
    "phi3": {
        **_LLAMA,
        "q_key": None,
        "k_key": None,
        "qkv_key": "model.layers.{layer}.self_attn.qkv_proj.weight",
        "fused": "blocks",
    },
    "gpt_neox": {
        "qkv_key": "gpt_neox.layers.{layer}.attention.query_key_value.weight",
        "fused": "per_head",
        "norm_key": "gpt_neox.layers.{layer}.input_layernorm.weight",
        "pairing": "rotate_half",
        "prefix": "gpt_neox.",
    },
    "gptj": {
        "q_key": "transformer.h.{layer}.attn.q_proj.weight",
        "k_key": "transformer.h.{layer}.attn.k_proj.weight",
        "norm_key": "transformer.h.{layer}.ln_1.weight",
        "pairing": "interleaved",
        "prefix": "transformer.",
    },
}


@dataclass(frozen=True)
class AttentionLayout:
    """One row of :data:`ATTENTION_LAYOUTS`, validated (see the module docstring for the fields)."""

    model_type: str
    pairing: Pairing
    q_key: str | None = None
    k_key: str | None = None
    qkv_key: str | None = None
    fused: str | None = None
    norm_key: str | None = None
    norm_offset: float = 0.0
    prefix: str = ""
    q_norm_key: str | None = None
    k_norm_key: str | None = None
    qk_norm_offset: float = 0.0
    q_gate: bool = False
    latent: LatentLayout | None = None

    def __post_init__(self) -> None:
        where = f"attention-layout row {self.model_type!r}"
        if self.pairing not in PAIRINGS:
            raise InvalidArgumentError(f"{where}: pairing must be one of {PAIRINGS}; got {self.pairing!r}.")
        separate = self.q_key is not None and self.k_key is not None
        fused = self.qkv_key is not None and self.fused in FUSED_LAYOUTS
        if self.latent is not None:
            if separate or fused:
                raise InvalidArgumentError(f"{where}: a latent layout names no q_key, k_key or qkv_key.")
        elif separate == fused:
            raise InvalidArgumentError(
                f"{where}: give either q_key and k_key, or qkv_key with fused in {FUSED_LAYOUTS}; "
                f"got q_key={self.q_key!r}, k_key={self.k_key!r}, qkv_key={self.qkv_key!r}, fused={self.fused!r}."
            )
        if self.q_gate and not separate:
            raise InvalidArgumentError(f"{where}: q_gate needs a separate query projection (q_key).")
        if (self.q_norm_key is None) != (self.k_norm_key is None):
            raise InvalidArgumentError(f"{where}: give both q_norm_key and k_norm_key, or neither.")
        for name in ("q_key", "k_key", "qkv_key", "norm_key", "q_norm_key", "k_norm_key"):
            key = getattr(self, name)
            if key is not None and "{layer}" not in key:
                raise InvalidArgumentError(f"{where}: {name} must contain '{{layer}}'; got {key!r}.")

    def keys(self, layer: int, *, norm: bool) -> dict[str, str]:
        """The checkpoint keys of ``layer``: role (``"q"``, ``"k"``, ``"qkv"``, ``"norm"``, ``"q_norm"``,
        ``"k_norm"``) -> key."""
        if self.latent is not None:
            roles = {f"latent_{role}": key for role, key in self.latent.keys(layer).items()}
            if norm and self.norm_key:
                roles["norm"] = self.norm_key.format(layer=layer)
            return roles
        roles = {"qkv": self.qkv_key} if self.qkv_key else {"q": self.q_key, "k": self.k_key}
        if norm and self.norm_key:
            roles["norm"] = self.norm_key
        if norm and self.q_norm_key and self.k_norm_key:
            roles["q_norm"], roles["k_norm"] = self.q_norm_key, self.k_norm_key
        return {role: str(key).format(layer=layer) for role, key in roles.items()}


def attention_layout(config: Mapping[str, Any]) -> AttentionLayout:
    """The layout row for a config.json's ``model_type``.

    Raises:
        InvalidArgumentError: the model type has no row (the message lists those that do).
    """
    model_type = str(config.get("model_type", "")).lower()
    row = ATTENTION_LAYOUTS.get(model_type)
    if row is None:
        raise InvalidArgumentError(
            f"no attention layout is known for model_type {model_type!r}, so its query/key weights cannot be "
            f"read from this table. Known: {', '.join(sorted(ATTENTION_LAYOUTS))} (other architectures are "
            "described by transformers: describe_architecture)."
        )
    return AttentionLayout(model_type=model_type, **row)


#: model_type -> where a model with a LEARNED position table keeps what its query/key circuit reads
#: the table with: the table, each layer's fused qkv projection and the LayerNorm before it.
#: ``qkv_layout="conv1d"``: GPT-2's Conv1D ``c_attn`` weight ``(d_model, 3·d_model)``, ``x @ W``,
#: columns ``[q | k | v]``, each split into heads of ``d_model / n_heads`` (transformers 5.23's
#: GPT2Attention: ``c_attn(x).split(embed_dim, dim=2)``).
TABLE_QK_LAYOUTS: dict[str, dict[str, Any]] = {
    "gpt2": {
        "position_key": "transformer.wpe.weight",
        "qkv_key": "transformer.h.{layer}.attn.c_attn.weight",
        "norm_key": "transformer.h.{layer}.ln_1.weight",
        "norm_bias_key": "transformer.h.{layer}.ln_1.bias",
        "qkv_layout": "conv1d",
        "eps_field": "layer_norm_epsilon",
        "prefix": "transformer.",
    },
}


@dataclass(frozen=True)
class TableQKLayout:
    """One row of :data:`TABLE_QK_LAYOUTS` (a learned-table model's position/qkv/LayerNorm keys)."""

    model_type: str
    position_key: str
    qkv_key: str
    norm_key: str
    norm_bias_key: str
    qkv_layout: Literal["conv1d"] = "conv1d"
    eps_field: str = "layer_norm_epsilon"
    prefix: str = ""

    def keys(self, layer: int) -> dict[str, str]:
        """Role (``"qkv"``, ``"norm"``, ``"norm_bias"``) -> checkpoint key of ``layer``."""
        return {
            "qkv": self.qkv_key.format(layer=layer),
            "norm": self.norm_key.format(layer=layer),
            "norm_bias": self.norm_bias_key.format(layer=layer),
        }


def table_qk_layout(config: Mapping[str, Any]) -> TableQKLayout | None:
    """The learned-table QK row for a config.json's ``model_type``, or None when it has none."""
    model_type = str(config.get("model_type", "")).lower()
    row = TABLE_QK_LAYOUTS.get(model_type)
    return None if row is None else TableQKLayout(model_type=model_type, **row)
