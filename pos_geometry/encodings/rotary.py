"""Rotary position embeddings (RoPE) as a positional table.

A rotary model stores no positional matrix: attention rotates each query/key pair of
dimensions ``(x_{2i}, x_{2i+1})`` (or, in the GPT-NeoX/Llama "rotate-half" layout, dims
``i`` and ``i + rotary_dim/2``) by the angle ``p·θ_i`` with
``θ_i = base^(-2i/rotary_dim)``, ``i = 0..rotary_dim/2-1``. The analogue of a learned
table is therefore ``T[p] = [cos(pθ_0), sin(pθ_0), cos(pθ_1), sin(pθ_1), ...]``: shape
``(n_positions, rotary_dim)``, column pairs ``(2i, 2i+1)`` are the rotation planes, and
frequencies decrease from left to right. (Transformers' own cos/sin caches use the
layout ``cat(freqs, freqs)``: its ``cos[:, i]`` is our column ``2i`` and its
``sin[:, i]`` our column ``2i+1``.)

Everything needed is in config.json: the base (``rope_theta`` / ``rotary_emb_base``), the
rotary fraction of each head (``partial_rotary_factor`` / ``rotary_pct``), the head size
(``head_dim``, else ``hidden_size / num_attention_heads``) and ``max_position_embeddings``.
Both transformers-v4 flat keys and the v5 ``rope_parameters`` dict are understood.
Scaled variants (linear, dynamic NTK, YaRN, LongRoPE, Llama-3) use the frequencies transformers
computes for them (:mod:`pos_geometry.encodings.rope_scaling`); an unknown ``rope_type`` is
refused, never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from pos_geometry._device import Device, resolve_device
from pos_geometry._limits import check_config_int, check_elements
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.encodings.rope_scaling import RopeScaling, read_scaling, scaled_frequencies
from pos_geometry.encodings.sinusoidal import check_base, positive_int
from pos_geometry.errors import InvalidArgumentError

__all__ = [
    "RotaryParams",
    "rotary_params",
    "layer_type_groups",
    "per_layer_type",
    "as_transformers_config",
    "inverse_frequencies",
    "rotary_table",
    "rotary_embedding",
    "scaling_fields",
]

DEFAULT_BASE = 10000.0
# transformers' defaults when a config omits the rotary fraction: GPT-NeoX rotates 25% of each head.
_DEFAULT_FRACTION = {"gpt_neox": 0.25, "gpt_neox_japanese": 1.0}

_MISSING = object()
_UNSCALED = RopeScaling()


@dataclass(frozen=True)
class RotaryParams:
    """What defines a rotary table.

    Attributes:
        base: the RoPE base θ (``rope_theta``): ``θ_i = base^(-2i/rotary_dim)``.
        rotary_dim: number of rotated dimensions per head (even); the table has this many columns.
        head_dim: dimensions per attention head.
        max_positions: the model's context length (``max_position_embeddings``).
        config_keys: the config keys that were read, nested ones dotted
            (``"rope_parameters.rope_theta"``), in the order they were used.
        defaults: parameters not in the config that took their standard default
            (``"rope_theta"`` -> 10000, ``"partial_rotary_factor"`` -> 1.0 or 0.25 for GPT-NeoX).
        scaling: the ``rope_type`` and its parameters (``rope_type == "default"``: unscaled).
    """

    base: float
    rotary_dim: int
    head_dim: int
    max_positions: int
    config_keys: tuple[str, ...] = ()
    defaults: tuple[tuple[str, Any], ...] = ()
    scaling: RopeScaling = _UNSCALED

    @property
    def n_frequencies(self) -> int:
        return self.rotary_dim // 2

    @property
    def rope_type(self) -> str:
        return self.scaling.rope_type

    @property
    def attention_factor(self) -> float:
        """The factor transformers multiplies its cos/sin by (YaRN/LongRoPE ``mscale``; else 1.0)."""
        return scaled_frequencies(self.scaling, self.base, self.rotary_dim, self.max_positions)[1]

    @property
    def context_length(self) -> int:
        """The pre-training context: ``original_max_position_embeddings`` when the rope type has one,
        else ``max_position_embeddings``."""
        return self.scaling.original_max_positions or self.max_positions


def _get(config: Mapping[str, Any], key: str) -> Any:
    """``config[key]`` following dots into nested mappings; ``_MISSING`` when absent or None."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or node.get(part) is None:
            return _MISSING
        node = node[part]
    return node


def _first(config: Mapping[str, Any], keys: tuple[str, ...], used: list[str], what: str) -> Any:
    """The value of the first key present; all present keys must agree."""
    found = [(k, v) for k in keys if (v := _get(config, k)) is not _MISSING]
    if not found:
        return _MISSING
    key, value = found[0]
    for other, other_value in found[1:]:
        if other_value != value:
            raise InvalidArgumentError(
                f"config gives two different {what}: {key}={value!r} and {other}={other_value!r}. "
                "Remove the stale one from the config."
            )
    used.append(key)
    return value


def layer_type_groups(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]] | None:
    """``{layer type: layers}`` when ``config`` rotates different layers with different parameters
    (transformers v5 ``rope_parameters`` keyed by layer type, as Gemma-2/3 write it, with ``layer_types``
    naming each layer's type), in the order of each type's first layer, else None. A type whose parameters
    are None does not rotate."""
    params = config.get("rope_parameters")
    if not (
        isinstance(params, Mapping) and params and all(isinstance(v, Mapping | None) for v in params.values())
    ):
        return None
    if not any(isinstance(v, Mapping) for v in params.values()):
        return None
    kinds = config.get("layer_types") or []
    groups = {kind: tuple(i for i, k in enumerate(kinds) if k == kind) for kind in params}
    # in layer order (a saved config.json and a config class may list the types in different orders)
    return dict(sorted(groups.items(), key=lambda item: (item[1][0] if item[1] else len(kinds), item[0])))


def per_layer_type(config: Mapping[str, Any], layer_type: str | None) -> Mapping[str, Any]:
    """``config`` with the rope parameters of ``layer_type`` as its only ones (unchanged when it has one set).

    Raises:
        InvalidArgumentError: the config rotates layer types differently and ``layer_type`` is None or
            unknown (the message lists each type with its layers), or that type does not rotate.
    """
    groups = layer_type_groups(config)
    if groups is None:
        if layer_type is not None and layer_type != "all":
            raise InvalidArgumentError(
                f"layer_type={layer_type!r} was given, but this config rotates every layer the same way; "
                "leave layer_type out."
            )
        return config
    listing = "; ".join(f"{kind!r}: layers {_spans(layers)}" for kind, layers in groups.items())
    if layer_type is None or layer_type not in groups:
        got = "none was given" if layer_type is None else f"got {layer_type!r}"
        raise InvalidArgumentError(
            f"this model rotates its layer types with different frequencies ({listing}), so no single rotary "
            f"table is right for every layer; pass layer_type= one of {sorted(groups)} ({got})."
        )
    params = config["rope_parameters"][layer_type]
    if params is None:
        raise InvalidArgumentError(
            f"layers of type {layer_type!r} do not rotate (no rope parameters): {listing}."
        )
    flat = (
        "rope_theta",
        "rope_scaling",
        "rope_local_base_freq",
    )  # v4 fields: the per-type dict replaces them
    return {**{k: v for k, v in config.items() if k not in flat}, "rope_parameters": dict(params)}


_PER_TYPE_HINTS = ("rope_local_base_freq", "sliding_window_pattern")


def as_transformers_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` as transformers itself reads it, when its rotation may differ by layer (a v4-style Gemma-3
    ``rope_local_base_freq``/``sliding_window_pattern``, or ``layer_types`` of more than one kind): transformers' own config
    class fills in per-layer-type ``rope_parameters`` and ``layer_types``. Other configs, or when
    transformers is not installed or rejects the config, come back unchanged."""
    kinds = config.get("layer_types")
    mixed = isinstance(kinds, list | tuple) and len(set(map(str, kinds))) > 1
    if layer_type_groups(config) is not None or not (mixed or any(k in config for k in _PER_TYPE_HINTS)):
        return config
    try:
        import transformers

        fields = {k: v for k, v in config.items() if k not in ("model_type", "gguf", "transformers_version")}
        full = transformers.AutoConfig.for_model(str(config.get("model_type", "")), **fields).to_dict()
    except Exception:
        return config
    return {**config, **{k: full[k] for k in ("rope_parameters", "layer_types") if full.get(k) is not None}}


def _spans(layers: tuple[int, ...]) -> str:
    if len(layers) <= 12:
        return ", ".join(str(i) for i in layers)
    return ", ".join(str(i) for i in layers[:6]) + f", ..., {layers[-1]} ({len(layers)} layers)"


def rotary_params(config: Mapping[str, Any], *, layer_type: str | None = None) -> RotaryParams:
    """Read the rotary parameters from a config.json dict (transformers v4 or v5 style).

    ``layer_type`` picks one set of a config that rotates layer types differently (Gemma-2/3:
    ``"sliding_attention"``, ``"full_attention"``; see :func:`per_layer_type`).

    Raises :class:`InvalidArgumentError` when a needed field is missing or inconsistent,
    when the config asks for a rope type transformers does not define, or when it rotates
    layer types differently and ``layer_type`` does not pick one.
    """
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(
            f"config must be a mapping (a parsed config.json); got {type(config).__name__}."
        )
    config = per_layer_type(config, layer_type)
    used: list[str] = []
    defaults: list[tuple[str, Any]] = []

    base = _first(config, ("rope_parameters.rope_theta", "rope_theta", "rotary_emb_base"), used, "rope bases")
    if base is _MISSING:
        base = DEFAULT_BASE
        defaults.append(("rope_theta", DEFAULT_BASE))
    base = check_base(base, "the rope base (rope_theta / rotary_emb_base)")

    head_dim = _first(config, ("head_dim",), used, "head sizes")
    if head_dim is _MISSING:
        hidden = _first(config, ("hidden_size", "n_embd", "d_model"), used, "hidden sizes")
        heads = _first(config, ("num_attention_heads", "n_head"), used, "head counts")
        if hidden is _MISSING or heads is _MISSING:
            raise InvalidArgumentError(
                "config has neither head_dim nor both hidden_size and num_attention_heads; the rotary head size "
                f"cannot be determined. Keys present: {sorted(config)}."
            )
        hidden = check_config_int("hidden_size", positive_int("hidden_size", hidden))
        heads = check_config_int("num_attention_heads", positive_int("num_attention_heads", heads))
        if hidden % heads:
            raise InvalidArgumentError(
                f"hidden_size ({hidden}) is not divisible by num_attention_heads ({heads}); give head_dim explicitly."
            )
        head_dim = hidden // heads
    head_dim = check_config_int("head_dim", positive_int("head_dim", head_dim))

    rotary_dim = _first(config, ("rotary_dim",), used, "rotary dims")
    if rotary_dim is _MISSING:
        fraction_keys = ("rope_parameters.partial_rotary_factor", "partial_rotary_factor", "rotary_pct")
        fraction = _first(config, fraction_keys, used, "rotary fractions")
        if fraction is _MISSING:
            fraction = _DEFAULT_FRACTION.get(str(config.get("model_type", "")), 1.0)
            defaults.append(("partial_rotary_factor", fraction))
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
            raise InvalidArgumentError(f"the rotary fraction must be in (0, 1]; got {fraction!r}.")
        rotary_dim = int(head_dim * fraction)  # the rounding transformers uses
    rotary_dim = positive_int("rotary_dim", rotary_dim)
    if rotary_dim % 2 or rotary_dim > head_dim:
        raise InvalidArgumentError(
            f"rotary_dim must be even and at most head_dim ({head_dim}); got {rotary_dim}."
        )

    max_positions = _first(config, ("max_position_embeddings", "n_positions"), used, "context lengths")
    if max_positions is _MISSING:
        raise InvalidArgumentError(
            f"config has no max_position_embeddings (or n_positions); it is needed for the table length. "
            f"Keys present: {sorted(config)}."
        )
    max_positions = positive_int("max_position_embeddings", max_positions)
    scaling = read_scaling(config, max_positions)
    params = RotaryParams(base, rotary_dim, head_dim, max_positions, tuple(used), tuple(defaults), scaling)
    params.attention_factor  # noqa: B018 - validates the scaling parameters now, not at first use
    return params


def inverse_frequencies(params: RotaryParams) -> torch.Tensor:
    """The inverse frequencies ``θ_i``, float64, shape ``(rotary_dim//2,)``.

    ``θ_i = base^(-2i/rotary_dim)`` for ``i = 0..rotary_dim/2-1``, scaled as transformers scales them
    for ``params.rope_type`` (see :mod:`pos_geometry.encodings.rope_scaling`).
    """
    return scaled_frequencies(params.scaling, params.base, params.rotary_dim, params.max_positions)[0]


def rotary_table(
    params: RotaryParams,
    n_positions: int | None = None,
    *,
    device: Device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The rotary table ``(n_positions, rotary_dim)``, interleaved ``[cos pθ_0, sin pθ_0, cos pθ_1, ...]``.

    ``n_positions`` defaults to ``params.max_positions``. Angles ``p·θ_i`` are computed in
    float64 on the CPU, then the table is cast to ``dtype`` and moved to ``device``.
    """
    n = params.max_positions if n_positions is None else positive_int("n_positions", n_positions)
    check_elements(
        "the rotary table (positions × rotary dimensions)", (n, params.rotary_dim),
        "Pass n_positions=<positions> for a shorter table (the config's max_position_embeddings sets the default).",
    )  # fmt: skip
    dev = resolve_device(device)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inverse_frequencies(params)[None, :]
    table = torch.empty(n, params.rotary_dim, dtype=torch.float64)
    table[:, 0::2] = torch.cos(angles)
    table[:, 1::2] = torch.sin(angles)
    return table.to(device=dev, dtype=dtype)


def scaling_fields(params: RotaryParams) -> dict[str, Any]:
    """The provenance entries that describe ``params.scaling`` (empty for ``rope_type="default"``)."""
    scaling = params.scaling
    if scaling.rope_type == "default":
        return {}
    fields: dict[str, Any] = {"rope_type": scaling.rope_type}
    fields.update({f"{scaling.config_key}.{name}": value for name, value in scaling.parameters})
    fields["attention_factor (derived)"] = params.attention_factor
    if scaling.rope_type == "dynamic":
        fields["dynamic (built at)"] = (
            f"sequence length <= max_position_embeddings ({params.max_positions}): unscaled frequencies, "
            "as transformers holds them at init"
        )
    return fields


def rotary_embedding(
    config: Mapping[str, Any],
    *,
    model_id: str,
    revision: str | None = None,
    n_positions: int | None = None,
    source: str = "config.json",
    device: Device = "cpu",
    dtype: torch.dtype = torch.float32,
    layer_type: str | None = None,
) -> PositionalEmbedding:
    """The rotary table of the model described by ``config`` as a :class:`PositionalEmbedding`.

    ``source`` says where the config came from (``"config.json"`` or ``"model table"``);
    ``provenance.config`` records exactly the config fields that were read (and, as
    ``"<name> (default)"``, any parameter that took its default). A scaled rope type adds
    ``rope_type``, its parameters as ``"<rope dict>.<name>"`` (``original_max_position_embeddings``
    with its default filled in) and ``"attention_factor (derived)"``: the factor transformers
    multiplies its cos/sin by, which this unit-norm table leaves out. For ``dynamic`` the table
    holds the frequencies used up to ``max_position_embeddings`` (the unscaled ones), which
    ``"dynamic (built at)"`` records. A config that rotates its layer types differently (Gemma-2/3)
    needs ``layer_type``; the table is then that type's, and ``layer_type`` and the ``layers`` it
    applies to are recorded. Layers that do not rotate at all (``no_rope_layers``: Llama-4, SmolLM3)
    are listed in the provenance: the table does not apply to them.
    """
    config = as_transformers_config(config)
    params = rotary_params(config, layer_type=layer_type)
    matrix = rotary_table(params, n_positions, device=device, dtype=dtype)
    groups = layer_type_groups(config)
    picked = per_layer_type(config, layer_type)
    fields: dict[str, Any] = {key: _get(picked, key) for key in params.config_keys}
    if groups is not None and layer_type is not None:
        fields.update({"layer_type": layer_type, "layers": groups[layer_type]})
    flags = config.get("no_rope_layers")  # Llama-4, SmolLM3: 1 = the layer rotates, 0 = NoPE
    if isinstance(flags, list | tuple) and not all(flags):
        fields["layers without rotation (NoPE; this table does not apply to them)"] = tuple(
            i for i, rotates in enumerate(flags) if not rotates
        )
    fields.update({f"{name} (default)": value for name, value in params.defaults})
    fields.update(scaling_fields(params))
    provenance = Provenance(
        model_id=model_id,
        kind="rotary",
        source=source,
        revision=revision,
        config=fields,
        original_dtype="float64",
    )
    return PositionalEmbedding(matrix, provenance, check_finite=False)
