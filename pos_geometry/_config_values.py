"""The config values every path reads, checked where the config is read.

A ``config.json`` (a folder's, the hub's) or a GGUF header's metadata is untrusted: a context length of
``"2048"``, ``Infinity`` or ``[2048]``, a head count of 0, or a ``layer_types`` list of the wrong length would
otherwise fail deep inside an analysis (``int(value)``, a division, transformers' own validation) with an
error that names neither the field nor the file. :func:`check_config_values` refuses such a config with one
:class:`~pos_geometry.errors.CheckpointFormatError` that names the field, the rule, the value and the fix.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

from pos_geometry._describe import describe
from pos_geometry.errors import CheckpointFormatError

__all__ = ["COUNT_FIELDS", "check_config_values"]

COUNT_FIELDS: tuple[str, ...] = (
    "max_position_embeddings", "n_positions", "n_ctx", "num_hidden_layers", "n_layer", "hidden_size", "n_embd",
    "d_model", "num_attention_heads", "n_head", "num_key_value_heads", "head_dim",
)  # fmt: skip
"""Fields that count something (positions, layers, heads, widths): a whole number ≥ 1 when present (a layer
count may be 0: a checkpoint of the embeddings alone)."""

_LAYER_FIELDS = ("num_hidden_layers", "n_layer")

_RATE_FIELDS = ("rope_theta", "rotary_emb_base", "rope_local_base_freq")
_FRACTION_FIELDS = ("partial_rotary_factor", "rotary_pct")


def _whole(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Integral):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _refuse(where: str, field: str, rule: str, value: Any, names: Mapping[str, str]) -> CheckpointFormatError:
    shown = f"{names[field]!r} (the config's {field!r})" if field in names else repr(field)
    return CheckpointFormatError(
        f"{where}: the config field {shown} must be {rule}; got {describe(value)}. Fix the config (or "
        "re-download the model)."
    )


def _layer_type_names() -> frozenset[str] | None:
    try:
        from transformers.configuration_utils import ALLOWED_LAYER_TYPES
    except ImportError:  # transformers is optional, or an older one without the list
        return None
    return frozenset(ALLOWED_LAYER_TYPES)


def check_config_values(
    config: Mapping[str, Any], where: str, names: Mapping[str, str] | None = None
) -> None:
    """Refuse ``config`` when a value every path reads is malformed (``where`` names the file in the error;
    ``names``: how the file itself names a field, e.g. ``{"num_attention_heads": "llama.attention.head_count"}``).

    Checked when present and not None: :data:`COUNT_FIELDS` are whole numbers ≥ 1; ``sliding_window`` a whole
    number ≥ 0; a rope base a finite number > 0; ``partial_rotary_factor``/``rotary_pct`` in (0, 1];
    ``layer_types`` a list of transformers' layer-type names with one entry per layer.

    Raises:
        CheckpointFormatError: naming the field, the rule and the value.
    """
    names = names or {}
    for field in COUNT_FIELDS:
        value = config.get(field)
        least = 0 if field in _LAYER_FIELDS else 1
        if value is not None and not (_whole(value) and value >= least):
            raise _refuse(where, field, f"a whole number ≥ {least}", value, names)
    window = config.get("sliding_window")
    if window is not None and not (_whole(window) and window >= 0):
        raise _refuse(where, "sliding_window", "a whole number of positions ≥ 0 (or null)", window, names)
    for field in _RATE_FIELDS:
        value = config.get(field)
        if value is not None and not (
            isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value > 0
        ):
            raise _refuse(where, field, "a finite number > 0", value, names)
    for field in _FRACTION_FIELDS:
        value = config.get(field)
        if value is not None and not (
            isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value <= 1
        ):
            raise _refuse(where, field, "a number in (0, 1]", value, names)
    _check_rope_types(config, where, names)
    _check_layer_types(config, where, names)


_ROPE_TYPE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def _check_rope_types(config: Mapping[str, Any], where: str, names: Mapping[str, str]) -> None:
    """A rope type (``rope_scaling``/``rope_parameters``, per layer type or not) is a short plain name: one
    holding markup or terminal escapes is refused here, before transformers' config class repeats it in a
    warning on the terminal."""
    for field in ("rope_scaling", "rope_parameters"):
        value = config.get(field)
        if not isinstance(value, Mapping):
            continue
        groups = [value, *(v for v in value.values() if isinstance(v, Mapping))]
        for group in groups:
            for key in ("rope_type", "type"):
                kind = group.get(key)
                if kind is not None and not (isinstance(kind, str) and _ROPE_TYPE.match(kind)):
                    raise _refuse(where, field, f"a mapping whose {key!r} is a rope type's name", kind, names)


def _check_layer_types(config: Mapping[str, Any], where: str, names: Mapping[str, str]) -> None:
    types = config.get("layer_types")
    if types is None:
        return
    if not isinstance(types, list | tuple) or not all(isinstance(t, str) for t in types):
        raise _refuse(where, "layer_types", "a list of layer-type names", types, names)
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    if _whole(layers) and len(types) != int(layers):
        raise _refuse(
            where,
            "layer_types",
            f"a list with one entry per layer (num_hidden_layers = {int(layers)})",
            types,
            names,
        )
    known = _layer_type_names()
    unknown = sorted({t for t in types if t not in known}) if known is not None else []
    if unknown:
        raise _refuse(
            where,
            "layer_types",
            f"names of transformers' layer types ({', '.join(sorted(known))})",
            unknown[:6],
            names,
        )
