"""Analytic positional tables: the sinusoidal table and rotary (RoPE) tables built from a config."""

from pos_geometry.encodings.rope_scaling import ROPE_TYPES, RopeScaling
from pos_geometry.encodings.rotary import (
    RotaryParams,
    inverse_frequencies,
    rotary_embedding,
    rotary_params,
    rotary_table,
    scaling_fields,
)
from pos_geometry.encodings.sinusoidal import sinusoidal, sinusoidal_table

__all__ = [
    "ROPE_TYPES",
    "RopeScaling",
    "scaling_fields",
    "RotaryParams",
    "inverse_frequencies",
    "rotary_embedding",
    "rotary_params",
    "rotary_table",
    "sinusoidal",
    "sinusoidal_table",
]
