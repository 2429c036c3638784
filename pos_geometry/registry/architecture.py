"""One description of a rotary model's attention, for every path and every source.

:func:`describe_architecture` turns a config (a folder's ``config.json``, or a GGUF's metadata already built
by transformers' config class, :mod:`pos_geometry.sources.gguf.config`) into an :class:`Architecture`:

* **layer types**: each type with its layers, its rotation (the rope parameters of that type, read as
  transformers reads them: per-type ``rope_parameters`` for Gemma-2/3-style configs, the one set
  otherwise), and its **attention span**: the largest query-key offset one of its layers can see. A
  layer of type ``sliding_attention`` sees ``sliding_window`` positions back (Gemma-2/3, Qwen2, Cohere-2
  mark such layers in ``layer_types``); a config with a ``sliding_window`` and no ``layer_types``
  (Mistral, Phi-3, Starcoder2) slides in every layer, as their transformers attention does; a
  ``chunked_attention`` layer (Llama-4) sees ``attention_chunk_size``; every other layer sees the
  training context.
* **attention layout** (:meth:`Architecture.attention`): the q/k(/v) projections, norms, pairing and
  prefix, derived from transformers (:func:`~pos_geometry.registry.derived_layout.derive_layout`), with
  the frequency groups and the layers that do not rotate; a row of
  :data:`~pos_geometry.registry.attention.ATTENTION_LAYOUTS` (the derivation's test oracle) stands in only
  where transformers cannot describe the model.

The atlas, the interventions and ``info`` all read it, so a GGUF and its folder describe the same model.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pos_geometry.encodings.rotary import (
    RotaryParams,
    as_transformers_config,
    layer_type_groups,
    rotary_params,
)
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.attention import ATTENTION_LAYOUTS, AttentionLayout, attention_layout
from pos_geometry.registry.derived_layout import DerivedLayout, LayoutUnavailable, derive_layout
from pos_geometry.registry.direction import AttentionDirection, attention_direction

__all__ = [
    "Architecture",
    "LayerType",
    "describe_architecture",
    "attention_of",
    "attention_span",
    "layer_list",
    "qk_biases",
]


@dataclass(frozen=True)
class LayerType:
    """Layers that share a rotation and an attention span.

    Attributes:
        label: the config's layer type (``"sliding_attention"``, ``"full_attention"``...), ``"all"`` when the
            config names none.
        layers: its layer indices.
        rotary: its rotary parameters, or None when its layers do not rotate.
        span: the largest query-key offset its layers see (sliding window, chunk, or the training context).
        window: the sliding window or chunk size that limits ``span``, or None.
    """

    label: str
    layers: tuple[int, ...]
    rotary: RotaryParams | None
    span: int
    window: int | None = None

    def describe(self) -> str:
        """One line: the rotation and the span."""
        if self.rotary is None:
            rotation = "no rotation"
        else:
            rotation = f"base {self.rotary.base:g}"
            if self.rotary.rope_type != "default":
                rotation += f", {self.rotary.rope_type} scaling"
            if self.rotary.rotary_dim != self.rotary.head_dim:
                rotation += f", {self.rotary.rotary_dim} of {self.rotary.head_dim} dims"
        reach = f"window {self.window}" if self.window is not None else f"full context {self.span}"
        return f"{rotation}; attends {reach}"


@dataclass(frozen=True)
class Architecture:
    """What a config says about a rotary model's attention (module docstring).

    Attributes:
        model_type: the config's ``model_type``.
        config: the config as transformers reads it (per-layer-type fields filled in).
        layer_types: every layer type, in the order of its first layer.
        n_layers: the number of decoder layers.
        context_length: the training context (``original_max_position_embeddings`` when the rope type has one).
    """

    model_type: str
    config: Mapping[str, Any]
    layer_types: tuple[LayerType, ...]
    n_layers: int
    context_length: int

    def layer_type_of(self, layer: int) -> LayerType:
        """The :class:`LayerType` holding ``layer``."""
        for kind in self.layer_types:
            if layer in kind.layers:
                return kind
        raise InvalidArgumentError(f"layer {layer} is not in this model's {self.n_layers} layers.")

    def span(self, layer: int) -> int:
        """The largest offset ``layer``'s attention sees."""
        return self.layer_type_of(layer).span

    def rotates_by_type(self) -> bool:
        """Whether different layer types rotate with different parameters (then no one table fits all)."""
        return layer_type_groups(self.config) is not None

    def direction(self) -> AttentionDirection:
        """Which way the model attends, and so its objective (:func:`~pos_geometry.registry.direction.attention_direction`)."""
        return attention_direction(self.config)

    def attention(self) -> tuple[AttentionLayout, DerivedLayout | None]:
        """The attention layout transformers gives (with its frequency groups and unrotated layers), or the
        layout table's row where transformers cannot describe the model (:func:`attention_of`).

        Raises:
            LayoutUnavailable: transformers cannot describe the architecture's queries and keys (the
                message says why).
        """
        return attention_of(self.config)


def attention_of(config: Mapping[str, Any]) -> tuple[AttentionLayout, DerivedLayout | None]:
    """A config's attention layout, with the frequency groups: the one transformers gives
    (:func:`derive_layout`), read first for every architecture. The layout table's row for the
    ``model_type`` (:data:`~pos_geometry.registry.attention.ATTENTION_LAYOUTS`, the derivation's test
    oracle) stands in only when transformers cannot describe the model (an older transformers without the
    class, a config it refuses); then the groups are None and the frequencies are the config's.

    Raises:
        LayoutUnavailable: transformers cannot describe the architecture and the table has no row for it.
    """
    try:
        derived = derive_layout(config)
    except LayoutUnavailable:
        if str(config.get("model_type", "")).lower() not in ATTENTION_LAYOUTS:
            raise
        return attention_layout(config), None
    return derived.layout, derived


@functools.lru_cache(maxsize=64)
def _biased(config_json: str) -> bool | None:
    import torch
    import transformers

    from pos_geometry.registry.derived_layout import _QKV, _attention_of, _blocks, _cfg, _child

    cfg = _cfg(json.loads(config_json))
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    with torch.device("meta"):
        skeleton = transformers.AutoModelForCausalLM.from_config(text)
    blocks = _blocks(skeleton, text.num_hidden_layers)[1]
    attn = _attention_of(blocks)[1]
    name = _child(attn, ("q_proj", "query", "wq", "q")) or _child(attn, _QKV)
    return None if name is None else getattr(attn.get_submodule(name), "bias", None) is not None


def qk_biases(config: Mapping[str, Any]) -> bool | None:
    """Whether the model's query/key projections add a bias, as transformers builds the model from ``config``
    (on the meta device, no weights); None when transformers cannot build it."""
    try:
        return _biased(json.dumps(dict(config), sort_keys=True, default=str))
    except Exception:  # transformers cannot build it: the caller decides from the checkpoint
        return None


def layer_list(layers: tuple[int, ...]) -> str:
    """Layer indices as runs: ``0-4, 6-10, 12``."""
    runs: list[list[int]] = []
    for i in layers:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def attention_span(config: Mapping[str, Any], kind: str, context: int) -> tuple[int, int | None]:
    """``(span, window)`` of a layer of type ``kind`` (module docstring); ``window`` None when the whole
    ``context`` is seen."""
    window = None
    kinds = config.get("layer_types")
    if kind == "sliding_attention" or (not kinds and kind == "all"):
        window = _positive(config.get("sliding_window"))
    elif kind == "chunked_attention":
        window = _positive(config.get("attention_chunk_size"))
    if window is None or window >= context:
        return context, None
    return window, window


def _layer_count(config: Mapping[str, Any]) -> int:
    for key in ("num_hidden_layers", "n_layer", "num_layers"):
        value = _positive(config.get(key))
        if value is not None:
            return value
    raise InvalidArgumentError("the config has no num_hidden_layers; its layers cannot be described.")


@functools.lru_cache(maxsize=64)
def _describe(config_json: str) -> Architecture:
    config = as_transformers_config(json.loads(config_json))
    n_layers = _layer_count(config)
    groups = layer_type_groups(config)
    kinds = [str(k) for k in config.get("layer_types") or []]
    if len(kinds) != n_layers:
        kinds = ["all"] * n_layers
    fallback = _any_rotary(config, groups).context_length  # for layer types that do not rotate
    still = _unrotated(config) if set(kinds) - _ATTENTION_KINDS else frozenset()
    built = []
    for label in dict.fromkeys(kinds):
        layers = tuple(i for i, k in enumerate(kinds) if k == label)
        if set(layers) <= still:  # a linear-attention or recurrent type (Qwen3-Next): no rotation
            rotary: RotaryParams | None = None
        elif groups is None:
            rotary = rotary_params(config)
        else:
            params = config["rope_parameters"].get(label)
            rotary = rotary_params(config, layer_type=label) if isinstance(params, Mapping) else None
        span, window = attention_span(config, label, rotary.context_length if rotary else fallback)
        built.append(LayerType(label, layers, rotary, span, window))
    context = max((t.rotary.context_length for t in built if t.rotary is not None), default=fallback)
    return Architecture(str(config.get("model_type", "")), config, tuple(built), n_layers, context)


_ATTENTION_KINDS = frozenset({"all", "full_attention", "sliding_attention", "chunked_attention"})


def _unrotated(config: Mapping[str, Any]) -> frozenset[int]:
    """The layers transformers' own model does not rotate (:func:`derive_layout`), for configs whose layer
    types include kinds other than attention; empty when transformers cannot describe the model."""
    try:
        return frozenset(derive_layout(config).unrotated)
    except InvalidArgumentError:
        return frozenset()


def _any_rotary(config: Mapping[str, Any], groups: Mapping[str, Any] | None) -> RotaryParams:
    """The rotary parameters of the first rotating layer type (for the context length)."""
    if groups is None:
        return rotary_params(config)
    for label in groups:
        if isinstance(config["rope_parameters"].get(label), Mapping):
            return rotary_params(config, layer_type=label)
    raise InvalidArgumentError("no layer type of this config rotates; it has no rotary parameters.")


def describe_architecture(config: Mapping[str, Any]) -> Architecture:
    """The :class:`Architecture` of a rotary model's config dict (cached per config).

    Raises:
        InvalidArgumentError: the config is not a mapping, names no layer count, or its rotary fields are
            missing or inconsistent.
    """
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(
            f"config must be a mapping (a parsed config.json); got {type(config).__name__}."
        )
    try:
        text = json.dumps(dict(config), sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"config is not JSON-like: {exc}") from None
    return _describe(text)
