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

Results are cached per config, in memory and on disk (:mod:`pos_geometry.registry.layout_store`), so
transformers' modeling code is imported only here, once per architecture and transformers version.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Mapping
from typing import Any

from pos_geometry._files import cache_dir
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.latent_layout import latent_children
from pos_geometry.registry.layout_check import LayoutUnavailable, latent_layout_from, layout_from
from pos_geometry.registry.layout_store import DerivedLayout, RotationGroup, load_layout, store_layout
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
_DERIVING = threading.Lock()
"""One derivation at a time: the probe replaces the modeling module's rotation function while it runs and
seeds torch's global generator, so two threads deriving at once would read each other's calls."""
THETA_AGREEMENT = 1e-5
"""Relative agreement between the probe's frequencies (float32 angles) and the config's formula in float64
under which the formula's digits are kept."""


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
        layout = latent_layout_from(model_type, blocks_path, attn_path, children, pairing, probe, p_blocks, per_layer,
                                inputs, probe_cfg)  # fmt: skip
    else:
        layout = layout_from(model_type, blocks_path, attn_path, q, k, qkv, q_norm, k_norm, pairing, probe,
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
    built = [_in_float64(group, json.loads(config_json)) for group in built]
    return DerivedLayout(layout, rotary_dim, head_dim, tuple(built), unrotated, transformers.__version__)


def _in_float64(group: RotationGroup, config: Mapping[str, Any]) -> RotationGroup:
    """``group`` with the frequencies of the config's own formula in float64 when they are the ones the probe
    observed (transformers computes its angles in float32, so the probe reads ``θ`` to about 1e-7): the
    probe decides which frequencies, the formula gives their digits. Left as observed otherwise."""
    from pos_geometry.encodings.rotary import inverse_frequencies, layer_type_groups, rotary_params

    label = group.label if (layer_type_groups(config) or {}).get(group.label) else None
    try:
        theta = inverse_frequencies(rotary_params(config, layer_type=label)).tolist()
    except Exception:  # a rope type or config pos_geometry does not read: the probe's values stand
        return group
    if len(theta) != len(group.theta) or not all(
        abs(a - b) <= THETA_AGREEMENT * abs(a) for a, b in zip(theta, group.theta, strict=True)
    ):
        return group
    return RotationGroup(group.label, group.layers, tuple(float(t) for t in theta), group.attention_factor)


@functools.lru_cache(maxsize=64)
def _stored_or_derived(store: str, config_json: str) -> DerivedLayout:
    """The layout of ``config_json``: kept in memory after the first call (per ``store``, the cache folder, so
    a new one gets its file), read from the disk store, else derived (one derivation at a time) and stored."""
    with _DERIVING:  # the probe patches the modeling module and seeds torch's global generator
        stored = load_layout(config_json)
        if stored is not None:
            return stored
        derived = _derive(config_json)
        store_layout(config_json, derived)
        return derived


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
        return _stored_or_derived(str(cache_dir()), text)
    except LayoutUnavailable:
        raise
    except ProbeError as exc:
        raise LayoutUnavailable(str(exc)) from None
    except Exception as exc:
        model_type = config.get("model_type")
        raise LayoutUnavailable(
            f"transformers could not describe model_type {model_type!r}: {type(exc).__name__}: {str(exc)[:300]}"
        ) from None
