"""Scaled rotary frequencies: every ``rope_type`` transformers knows, computed from the config alone.

transformers turns a config's rope settings into inverse frequencies ``θ_i`` (one per rotation
plane, ``i = 0..rotary_dim/2-1``) and an *attention factor* that multiplies its cos/sin caches
(``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``). The same formulas are written out
here (float64, no transformers import):

* ``default``: ``θ_i = base^(-2i/d)`` with ``d = rotary_dim``; attention factor 1.
* ``linear`` (position interpolation): ``θ_i / factor``.
* ``dynamic`` (dynamic NTK): the base grows with the sequence length ``L``:
  ``base · (factor·L/max_pos - (factor-1))^(d/(d-2))``, for ``L > max_pos`` only. What is built
  here is the table at ``L = max_position_embeddings``, i.e. the **unscaled** frequencies, which
  is what transformers holds after init and uses for every sequence up to that length.
* ``yarn``: per plane, a ramp between the interpolated ``θ_i/factor`` and the original ``θ_i``,
  set by ``beta_fast``/``beta_slow`` (default 32/1) at ``original_max_position_embeddings``;
  attention factor ``0.1·ln(factor) + 1`` (or the ``mscale``/``mscale_all_dim`` ratio, or the
  config's ``attention_factor``).
* ``longrope``: ``θ_i / short_factor[i]`` (the factors used up to
  ``original_max_position_embeddings``, as at init); attention factor
  ``sqrt(1 + ln(factor)/ln(original_max_position_embeddings))``.
* ``llama3``: planes with wavelength above ``original/low_freq_factor`` are divided by
  ``factor``, those below ``original/high_freq_factor`` kept, and the ones between smoothly mixed.

Both config spellings are read: transformers v5 ``rope_parameters`` (which also holds
``rope_theta``) and v4 ``rope_scaling`` (with ``"type"`` or ``"rope_type"``) next to a flat
``rope_theta``. As in transformers, a top-level ``original_max_position_embeddings`` (Phi-3)
takes precedence over the one inside the rope dict, and the default is ``max_position_embeddings``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from pos_geometry._describe import describe
from pos_geometry.errors import InvalidArgumentError

__all__ = ["ROPE_TYPES", "RopeScaling", "read_scaling", "scaled_frequencies"]

ROPE_TYPES: tuple[str, ...] = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")
_SCALING_KEYS = ("rope_parameters", "rope_scaling")
# keys of a rope dict that are not scaling parameters (they are read as base / rotary fraction)
_NOT_SCALING = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})
_REQUIRED = {
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": (),
    "longrope": ("short_factor", "long_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
}


@dataclass(frozen=True)
class RopeScaling:
    """The scaling part of a rope config.

    Attributes:
        rope_type: one of :data:`ROPE_TYPES`.
        parameters: the scaling fields (``factor``, ``beta_fast``, ``short_factor`` ...) as sorted
            ``(key, value)`` pairs; lists become tuples.
        config_key: where they were read (``"rope_parameters"``, ``"rope_scaling"``, or ``""`` for
            a config without either).
        original_max_positions: the pre-training context (``original_max_position_embeddings``,
            defaulting to ``max_position_embeddings``) for the rope types that use one, else None.
    """

    rope_type: str = "default"
    parameters: tuple[tuple[str, Any], ...] = ()
    config_key: str = ""
    original_max_positions: int | None = None

    @property
    def parameter_dict(self) -> dict[str, Any]:
        return dict(self.parameters)


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _rope_type(value: Mapping[str, Any], key: str) -> str:
    rope_type = value.get("rope_type", value.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise InvalidArgumentError(
            f"config {key} has rope_type={rope_type!r}; the rope types pos_geometry computes are "
            f"{ROPE_TYPES}. Another type would give a wrong table, so none is built."
        )
    return rope_type


# (lowest, highest) of each rope-scaling parameter; a number outside, or not a finite real number, is refused
_BOUNDS: dict[str, tuple[float, float]] = {
    "factor": (1e-6, 1e6),
    "short_factor": (1e-6, 1e6),
    "long_factor": (1e-6, 1e6),
    "low_freq_factor": (1e-6, 1e6),
    "high_freq_factor": (1e-6, 1e6),
    "beta_fast": (1e-6, 1e6),
    "beta_slow": (1e-6, 1e6),
    "attention_factor": (1e-6, 1e6),
    "mscale": (0.0, 1e6),
    "mscale_all_dim": (0.0, 1e6),
}
# (larger, smaller): the first must exceed the second when both are given
_ORDERED = (("high_freq_factor", "low_freq_factor"), ("beta_fast", "beta_slow"))


def check_scaling_parameters(rope_type: str, params: Mapping[str, Any], where: str = "the edit's") -> None:
    """The rules a config's rope-scaling parameters meet (:func:`_check_parameters`), for parameters given
    elsewhere (a positional edit): ``where`` opens the message in place of ``config <key>``."""
    _check_parameters("", rope_type, params, where)


def _check_parameters(key: str, rope_type: str, params: Mapping[str, Any], where: str | None = None) -> None:
    """Each scaling parameter a finite real number within its bounds (a list of them for the longrope
    factors), and the ordered pairs in order; else :class:`InvalidArgumentError` naming the field, the
    value and the rule. transformers only warns about most of these; a zero, subnormal, negative or
    textual factor would otherwise give a NaN or infinite table, or a ZeroDivisionError."""
    field = (lambda name: f"{where} {name}") if where else (lambda name: f"config {key}.{name}")
    if where:
        fix = "Pass a value within the rule."
    else:
        fix = (
            f"Fix the config (the model card or transformers' documentation of rope_type {rope_type!r} gives the "
            "intended value)."
        )
    for name, (low, high) in _BOUNDS.items():
        if name not in params:
            continue
        value = params[name]
        values = (
            value if name in ("short_factor", "long_factor") and isinstance(value, tuple | list) else [value]
        )
        for v in values:
            number = not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v)
            if not number or not low <= v <= high:
                kind = "a list of numbers" if len(values) > 1 or value is not v else "a finite number"
                raise InvalidArgumentError(
                    f"{field(name)} (rope_type {rope_type!r}) is {describe(value)}: it must be {kind} between "
                    f"{low:g} and {high:g}. {fix}"
                )
    for larger, smaller in _ORDERED:
        if larger in params and smaller in params and not params[larger] > params[smaller]:
            raise InvalidArgumentError(
                f"{field(larger)} ({params[larger]!r}) must be greater than {field(smaller)} "
                f"({params[smaller]!r}) for rope_type {rope_type!r}. {fix}"
            )


def read_scaling(config: Mapping[str, Any], max_positions: int) -> RopeScaling:
    """The :class:`RopeScaling` of a config.json dict (v4 ``rope_scaling`` or v5 ``rope_parameters``).

    Raises :class:`InvalidArgumentError` for an unknown rope type, a missing required field, a parameter
    that is not a finite number within its bounds (:data:`_BOUNDS`, :data:`_ORDERED`), or two rope dicts
    that disagree on the type.
    """
    found: list[tuple[str, Mapping[str, Any], str]] = []
    for key in _SCALING_KEYS:
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise InvalidArgumentError(f"config {key} must be a dict or null; got {value!r}.")
        found.append((key, value, _rope_type(value, key)))
    scaled = [f for f in found if f[2] != "default"]
    if len({f[2] for f in scaled}) > 1:
        raise InvalidArgumentError(
            f"config gives two rope types: {', '.join(f'{k}.rope_type={t!r}' for k, _, t in scaled)}. "
            "Remove the stale one from the config."
        )
    if not scaled:
        return RopeScaling("default", (), found[0][0] if found else "")
    key, value, rope_type = scaled[0]
    params = {k: _frozen(v) for k, v in value.items() if k not in _NOT_SCALING and v is not None}
    missing = [name for name in _REQUIRED[rope_type] if name not in params]
    if missing:
        raise InvalidArgumentError(
            f"config {key} has rope_type={rope_type!r} but no {', '.join(missing)}; transformers needs "
            "them to build the frequencies. Add them to the config."
        )
    _check_parameters(key, rope_type, params)
    original = None
    if rope_type in ("yarn", "longrope", "llama3"):
        top = config.get("original_max_position_embeddings")
        original = top if top is not None else params.get("original_max_position_embeddings", max_positions)
        if isinstance(original, bool) or not isinstance(original, int) or not 2 <= original <= 2**24:
            raise InvalidArgumentError(
                f"original_max_position_embeddings (rope_type {rope_type!r}) must be an int between 2 and {2**24:,} "
                f"(the pre-training context; its logarithm divides the scaling arithmetic); got {original!r}. "
                "Fix the config."
            )
        params["original_max_position_embeddings"] = original
    return RopeScaling(rope_type, tuple(sorted(params.items())), key, original)


def _default(base: float, dim: int) -> torch.Tensor:
    return base ** -(torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def _number(params: Mapping[str, Any], name: str, default: float | None = None) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgumentError(f"rope parameter {name} must be a finite number; got {value!r}.")
    return float(value)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(base: float, dim: int, params: Mapping[str, Any], max_positions: int) -> tuple[torch.Tensor, float]:
    original = int(params["original_max_position_embeddings"])
    factor = params.get("factor")
    factor = max_positions / original if factor is None else _number(params, "factor")
    attention = params.get("attention_factor")
    if attention is None:
        mscale, mscale_all = params.get("mscale"), params.get("mscale_all_dim")
        if mscale and mscale_all:
            attention = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all)
        else:
            attention = _yarn_mscale(factor)
    beta_fast = params.get("beta_fast") or 32
    beta_slow = params.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    theta = _default(base, dim)
    keep = 1 - ramp  # 1: extrapolate (original frequency), 0: interpolate (divided by factor)
    return theta / factor * (1 - keep) + theta * keep, float(attention)


def _longrope(
    base: float, dim: int, params: Mapping[str, Any], max_positions: int
) -> tuple[torch.Tensor, float]:
    original = int(params["original_max_position_embeddings"])
    short = params["short_factor"]
    if not isinstance(short, tuple | list) or len(short) != dim // 2:
        raise InvalidArgumentError(
            f"longrope short_factor must list one factor per rotation plane ({dim // 2}); got {short!r:.80}."
        )
    factor = params.get("factor")
    factor = max_positions / original if factor is None else _number(params, "factor")
    attention = params.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    return _default(base, dim) / torch.tensor(short, dtype=torch.float64), float(attention)


def _llama3(base: float, dim: int, params: Mapping[str, Any]) -> torch.Tensor:
    theta = _default(base, dim)
    factor = _number(params, "factor")
    low_ff, high_ff = _number(params, "low_freq_factor"), _number(params, "high_freq_factor")
    original = int(params["original_max_position_embeddings"])
    low_wavelen, high_wavelen = original / low_ff, original / high_ff
    wavelen = 2 * math.pi / theta
    scaled = torch.where(wavelen > low_wavelen, theta / factor, theta)
    smooth = (original / wavelen - low_ff) / (high_ff - low_ff)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled)


def scaled_frequencies(
    scaling: RopeScaling, base: float, rotary_dim: int, max_positions: int
) -> tuple[torch.Tensor, float]:
    """``(θ, attention_factor)``: the inverse frequencies ``(rotary_dim//2,)`` float64 and the cos/sin factor.

    Equal (to float32 rounding) to ``ROPE_INIT_FUNCTIONS[rope_type](config)`` of transformers at
    init (for ``dynamic``, the unscaled frequencies; for ``longrope``, the ``short_factor`` ones).
    """
    params = scaling.parameter_dict
    rope_type = scaling.rope_type
    if rope_type == "default":
        return _default(base, rotary_dim), 1.0
    if rope_type == "linear":
        return _default(base, rotary_dim) / _number(params, "factor"), 1.0
    if rope_type == "dynamic":
        _number(params, "factor")  # validated; it has no effect up to max_position_embeddings
        return _default(base, rotary_dim), 1.0
    if rope_type == "yarn":
        return _yarn(base, rotary_dim, params, max_positions)
    if rope_type == "longrope":
        return _longrope(base, rotary_dim, params, max_positions)
    return _llama3(base, rotary_dim, params), 1.0
