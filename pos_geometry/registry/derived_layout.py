"""Attention layouts derived from transformers itself, for any rotary ``model_type`` it can build.

A row in :data:`~pos_geometry.registry.attention.ATTENTION_LAYOUTS` would always lag behind
transformers, which already knows, for every model it supports, the parameter names and shapes,
the head counts, which layers rotate with which frequencies, and the pairing. :func:`derive_layout`
asks it:

1. **names and shapes**: the model is built from its config on the meta device (no weights); the
   decoder blocks are the ``ModuleList`` of ``num_hidden_layers`` modules, and in block 0 the
   attention module's query/key projections (or fused projection) and query/key norms are found by
   name among its own children, their shapes checked against the head counts.
2. **rotation, by probing**: a tiny instance (the same layer count, head size and rope parameters;
   two heads, narrow MLPs, a small vocabulary) runs one forward pass with a spy on the modeling
   module's own rotation function (``apply_rotary_pos_emb``, or Llama-4's ``apply_rotary_emb``).
   Per layer it records the queries and keys before and after the rotation and the cos/sin (or
   complex frequencies) transformers computed from the real rope parameters. From them:
   which layers rotate (NoPE layers make no call), each layer's frequencies
   ``θ_i = atan2(sin, cos)`` at position 1 (per-layer-type RoPE, partial rotary and every scaled
   rope type come out as transformers computes them), the attention factor (``cos`` at position 0),
   and the **pairing**: the one of rotate-half or interleaved that reproduces the rotated queries.
3. **input norm and offsets, by probing**: the block's norm whose output is the attention input;
   whether a norm multiplies by ``w`` or ``1 + w`` (Gemma) is read from its output with ``w = 0``.
4. **check**: the derived reading of W_q/W_k (fused layouts split both ways, the right one kept),
   times the input, through the q/k norm gains, must equal the queries and keys the model rotated,
   up to one scalar per token and head (the norms' RMS divisors). Anything that fails is refused
   with the reason (:class:`LayoutUnavailable`), never guessed.

Results are cached per config. transformers is imported only here, on first use.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.attention import AttentionLayout
from pos_geometry.registry.latent_layout import latent_children
from pos_geometry.registry.rotation_probe import (
    PROBE_LEN,
    ROTATIONS,
    ProbeError,
    frequencies,
    heads_first,
    rotate,
    rotation_calls,
    shrunk,
    spy,
)

__all__ = ["DerivedLayout", "RotationGroup", "LayoutUnavailable", "derive_layout"]

_Q = ("q_proj", "query", "wq", "q")
_K = ("k_proj", "key", "wk", "k")
_QKV = ("qkv_proj", "query_key_value", "Wqkv", "qkv", "W_pack", "c_attn")
_Q_NORM = ("q_norm", "query_layernorm", "q_layernorm", "q_ln")
_K_NORM = ("k_norm", "key_layernorm", "k_layernorm", "k_ln")


class LayoutUnavailable(InvalidArgumentError):
    """transformers cannot tell pos_geometry how this architecture's queries and keys are laid out (the
    message says which step failed)."""


@dataclass(frozen=True)
class RotationGroup:
    """Layers that rotate with the same frequencies: ``theta`` ``(n_planes,)`` float64, ``attention_factor``
    (transformers' cos/sin scale), and a ``label`` (the config's layer type, e.g. ``"sliding_attention"``)."""

    label: str
    layers: tuple[int, ...]
    theta: tuple[float, ...]
    attention_factor: float


@dataclass(frozen=True)
class DerivedLayout:
    """What transformers says about a config's attention: the :class:`AttentionLayout` (names, pairing,
    norms), the rotary dimension, the frequency groups, and the layers with no rotation at all."""

    layout: AttentionLayout
    rotary_dim: int
    head_dim: int
    groups: tuple[RotationGroup, ...]
    unrotated: tuple[int, ...]
    transformers_version: str

    def group_of(self, layer: int) -> RotationGroup | None:
        return next((g for g in self.groups if layer in g.layers), None)


def _cfg(config: Mapping[str, Any]) -> Any:
    import transformers

    fields = {k: v for k, v in config.items() if k not in ("gguf", "architectures", "transformers_version")}
    model_type = str(fields.pop("model_type", ""))
    try:
        return transformers.AutoConfig.for_model(model_type, **fields)
    except (ValueError, KeyError, TypeError) as exc:
        raise LayoutUnavailable(
            f"transformers cannot build a config of model_type {model_type!r}: {exc}"
        ) from None


def _blocks(model: Any, n_layers: int) -> tuple[str, Any]:
    import torch

    found = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, torch.nn.ModuleList) and len(m) == n_layers and n_layers > 0
    ]
    if not found:
        raise LayoutUnavailable(f"no list of {n_layers} decoder blocks in {type(model).__name__}.")
    return min(found, key=lambda f: f[0].count("."))


def _attention(block: Any) -> tuple[str, Any]:
    found = [(n, m) for n, m in block.named_modules() if n and "attention" in type(m).__name__.lower()]
    found = [(n, m) for n, m in found if not any(o != n and o.startswith(n + ".") for o, _ in found)] or found
    if not found:
        raise LayoutUnavailable(f"no attention module in {type(block).__name__}.")
    return min(found, key=lambda f: f[0].count("."))


def _attention_of(blocks: Any) -> tuple[str, Any]:
    """The attention module of the first block that has one with query/key projections by a known name
    (hybrid models start with linear-attention or recurrent blocks)."""
    reason = None
    for block in blocks:
        try:
            path, attn = _attention(block)
        except LayoutUnavailable as exc:
            reason = exc
            continue
        if (_child(attn, _Q) and _child(attn, _K)) or _child(attn, _QKV) or latent_children(attn):
            return path, attn
        children = [n for n, _ in attn.named_children()]
        why = (
            "its queries and keys pass through low-rank latent projections whose names differ from DeepSeek's "
            "(q_a_proj, q_a_layernorm, q_b_proj or q_proj, kv_a_proj_with_mqa), so their rotary parts cannot be found"
            if any("_a_proj" in n or "lora" in n for n in children)
            else "it has no query/key projections by a known name"
        )
        reason = LayoutUnavailable(f"the {type(attn).__name__}: {why} (its parts: {', '.join(children)}).")
    raise reason or LayoutUnavailable("no decoder block has an attention module.")


def _child(module: Any, names: tuple[str, ...]) -> str | None:
    children = dict(module.named_children())
    return next((n for n in names if n in children and hasattr(children[n], "weight")), None)


@functools.lru_cache(maxsize=64)
def _derive(config_json: str) -> DerivedLayout:
    import torch
    import transformers

    cfg = _cfg(json.loads(config_json))
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    if text is not cfg and getattr(text, "model_type", None):
        cfg = text  # a composite model: its language model's config
    model_type = cfg.model_type
    n_layers = cfg.num_hidden_layers
    with torch.device("meta"):
        try:
            skeleton = transformers.AutoModelForCausalLM.from_config(cfg)
        except Exception as exc:
            raise LayoutUnavailable(f"transformers cannot build a {model_type} causal LM: {exc}") from None
    blocks_path, blocks = _blocks(skeleton, n_layers)
    attn_path, attn = _attention_of(blocks)
    q, k, qkv = _child(attn, _Q), _child(attn, _K), _child(attn, _QKV)
    q_norm, k_norm = _child(attn, _Q_NORM), _child(attn, _K_NORM)

    probe_cfg = shrunk(cfg)
    try:
        with torch.random.fork_rng(devices=[]):  # the probe's seed leaves the caller's random stream alone
            torch.manual_seed(0)
            probe = transformers.AutoModelForCausalLM.from_config(probe_cfg).float().eval()
    except Exception as exc:
        raise LayoutUnavailable(f"a small {model_type} probe could not be built: {exc}") from None
    p_blocks = _blocks(probe, n_layers)[1]
    modeling = sys.modules[type(probe).__module__]
    names = [n for n in ROTATIONS if callable(getattr(modeling, n, None))]
    if not names:
        raise LayoutUnavailable(
            f"{type(probe).__module__} rotates through no function pos_geometry can observe."
        )
    calls: list = []
    current = [-1]
    saved = []
    hooks = []
    inputs: dict[int, Any] = {}
    for i, block in enumerate(p_blocks):
        try:
            a = block.get_submodule(attn_path)
        except AttributeError:  # a hybrid model's linear-attention or recurrent block
            continue

        def enter(mod: Any, args: tuple, kwargs: dict, i: int = i) -> None:
            current[0] = i
            x = args[0] if args else kwargs.get("hidden_states")
            inputs.setdefault(i, x.detach() if isinstance(x, torch.Tensor) else None)

        hooks.append(a.register_forward_pre_hook(enter, with_kwargs=True))
    for n in names:
        original, spying = spy(modeling, n, calls, current)
        saved.append((n, original))
        setattr(modeling, n, spying)
    ids = torch.arange(2, 2 + PROBE_LEN)[None]
    try:
        with torch.no_grad():
            probe(ids)
    except Exception as exc:
        raise LayoutUnavailable(f"the {model_type} probe failed to run: {exc}") from None
    finally:
        for n, original in saved:
            setattr(modeling, n, original)
        for h in hooks:
            h.remove()
    per_layer: dict[int, tuple] = {}
    seen_calls: dict[int, list] = {}
    for layer, args, kwargs, out in calls:
        if layer >= 0:
            seen_calls.setdefault(layer, []).extend(rotation_calls(args, kwargs, out))
    for layer, rotated in seen_calls.items():
        if len(rotated) >= 2:  # (q, k): one call for both, or one call each
            (q_in, q_out, cos, sin), (k_in, k_out, _, _) = rotated[:2]
            per_layer[layer] = (q_in, k_in, cos, sin, q_out, k_out)
    if not per_layer:
        raise LayoutUnavailable(
            f"no layer of the {model_type} probe called its rotation function with queries and keys."
        )

    # frequencies per layer, grouped
    freqs: dict[int, tuple[tuple[float, ...], float, str]] = {}
    for layer, (_, _, cos, sin, _, _) in per_layer.items():
        theta, scale, cos_layout = frequencies(cos, sin)
        freqs[layer] = (tuple(theta), scale, cos_layout)
    rotary_dim = 2 * len(next(iter(freqs.values()))[0])

    # pairing: the convention that reproduces the model's own rotation of layer `first`
    first = min(per_layer)
    q_pre, _, _, _, q_post, _ = per_layer[first]
    theta0 = torch.tensor(freqs[first][0], dtype=torch.float64)
    heads = probe_cfg.num_attention_heads
    pre, post = heads_first(q_pre, heads, PROBE_LEN), heads_first(q_post, heads, PROBE_LEN)
    positions = torch.arange(PROBE_LEN)
    target = post.double()[..., :rotary_dim]
    tolerance = 1e-4 * float(
        target.abs().max()
    )  # transformers' angles are float32; a wrong pairing is O(1) off
    pairing = next(
        (
            p
            for p in ("rotate_half", "interleaved")
            if torch.allclose(
                rotate(pre, theta0, p, freqs[first][1], positions)[..., :rotary_dim],
                target,
                rtol=0,
                atol=tolerance,
            )
        ),
        None,
    )
    if pairing is None:
        # DeepSeek-V3's interleaved rotation regroups each head's dims (evens, then odds) before rotating
        # halves: its planes are adjacent pairs of the input rows, its output in the regrouped order. A
        # common reordering of queries and keys leaves every q·k as it is.
        regroup = torch.cat([torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2)])
        moved = rotate(pre, theta0, "interleaved", freqs[first][1], positions)[..., :rotary_dim][..., regroup]
        if torch.allclose(moved, target, rtol=0, atol=tolerance):
            pairing = "interleaved"
    if pairing is None:
        raise LayoutUnavailable(
            f"neither rotate-half nor interleaved pairs reproduce {model_type}'s own rotation."
        )

    children = latent_children(attn)
    if children is not None:
        layout = _latent_layout(model_type, blocks_path, attn_path, children, pairing, probe, p_blocks, per_layer,
                                inputs, probe_cfg)  # fmt: skip
    else:
        layout = _layout_from(model_type, blocks_path, attn_path, q, k, qkv, q_norm, k_norm, pairing, probe,
                              p_blocks, attn, per_layer, inputs, probe_cfg)  # fmt: skip
    layer_types = list(getattr(cfg, "layer_types", None) or [])
    groups: dict[tuple, list[int]] = {}
    for layer in sorted(freqs):
        theta, scale, _ = freqs[layer]
        groups.setdefault((tuple(round(t, 12) for t in theta), round(scale, 9)), []).append(layer)
    built = []
    for n, ((_, scale), layers) in enumerate(groups.items()):
        kinds = {layer_types[i] for i in layers} if len(layer_types) == n_layers else set()
        label = kinds.pop() if len(kinds) == 1 else ("all" if len(groups) == 1 else f"group{n}")
        built.append(RotationGroup(label, tuple(layers), tuple(freqs[layers[0]][0]), float(scale)))
    unrotated = tuple(i for i in range(n_layers) if i not in freqs)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return DerivedLayout(layout, rotary_dim, head_dim, tuple(built), unrotated, transformers.__version__)


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


def _latent_layout(model_type, blocks_path, attn_path, children, pairing, probe, p_blocks, per_layer, inputs,
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


def _layout_from(model_type, blocks_path, attn_path, q, k, qkv, q_norm, k_norm, pairing, probe, p_blocks, attn,
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


def derive_layout(config: Mapping[str, Any]) -> DerivedLayout:
    """The :class:`DerivedLayout` of a config dict (a parsed ``config.json``), from transformers (module docstring).

    Raises:
        LayoutUnavailable: transformers cannot build the model, it does not rotate through a function
            pos_geometry can observe, or the derived reading does not reproduce the model's own queries.
    """
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(f"config must be a mapping; got {type(config).__name__}.")
    try:
        text = json.dumps(dict(config), sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"config is not JSON-like: {exc}") from None
    try:
        return _derive(text)
    except LayoutUnavailable:
        raise
    except ProbeError as exc:
        raise LayoutUnavailable(str(exc)) from None
    except Exception as exc:
        model_type = config.get("model_type")
        raise LayoutUnavailable(
            f"transformers could not describe model_type {model_type!r}: {type(exc).__name__}: {str(exc)[:300]}"
        ) from None
