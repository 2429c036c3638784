"""Rotary edits: changes to a rotary model's frequencies (:class:`RemovePlanes`, :class:`ScaleFrequencies`,
:class:`RopeScaling`), of every layer or of one layer type or some layers, and the control that must hurt
(:class:`SwapPairing`).

Each changes transformers' own rotary module (its ``inv_freq`` buffer through transformers' own rope-init
functions, or cos/sin for chosen blocks through a pre-hook); nothing re-implements the model's forward.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from pos_geometry.errors import InvalidArgumentError, NotApplicableError
from pos_geometry.interventions.edits import Edit, int_argument
from pos_geometry.interventions.target import EditTarget

__all__ = ["RemovePlanes", "ScaleFrequencies", "RopeScaling", "SwapPairing"]


def _layer_tuple(layers: Any) -> tuple[int, ...] | None:
    if layers is None:
        return None
    chosen = (layers,) if isinstance(layers, int) and not isinstance(layers, bool) else tuple(layers)
    if not chosen or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in chosen):
        raise InvalidArgumentError(f"layers must be None or layer indices >= 0; got {layers!r}.")
    return tuple(sorted(set(chosen)))


class _RotaryEdit(Edit):
    """A change of the rotary frequencies, of every layer or of some: ``layer_type`` (a type's own buffer, or
    its layers where one buffer serves every type) and/or ``layers``."""

    applies_to: ClassVar[str] = "rotary"
    rehearse: ClassVar[bool] = True

    def _scope_label(self) -> str:
        parts = [f"layer type {self.layer_type}"] if self.layer_type else []
        if self.layers is not None:
            from pos_geometry.registry.architecture import layer_list

            parts.append(f"layers {layer_list(self.layers)}")
        return f" ({', '.join(parts)})" if parts else ""

    def where(self, target: EditTarget) -> tuple[list[Any], tuple[int, ...] | None]:
        """``(slots, layers)``: the rotary buffers to change and, when only some layers change, which."""
        layers, kinds = self.layers, target.layer_types()
        try:
            slots = target.rotary_slots(self.layer_type)
        except NotApplicableError:
            if self.layer_type is None or not kinds:
                raise
            if self.layer_type not in kinds:
                raise NotApplicableError(
                    f"layer_type={self.layer_type!r}: this model's layer types are {sorted(set(kinds))}."
                ) from None
            slots = target.rotary_slots()  # one shared buffer: change that type's layers only
            if layers is None:
                layers = tuple(i for i, k in enumerate(kinds) if k == self.layer_type)
        if self.layer_type is not None and layers is not None and kinds:
            outside = [i for i in layers if i < len(kinds) and kinds[i] != self.layer_type]
            if outside:
                raise InvalidArgumentError(f"layers {outside} are not of type {self.layer_type!r}.")
        n = target.loaded.n_layers
        if layers is not None and any(i >= n for i in layers):
            raise InvalidArgumentError(f"layers must be in [0, {n}); got {list(layers)}.")
        return slots, layers

    def check(self, target: EditTarget) -> None:
        super().check(target)
        self.where(target)


@dataclass(frozen=True)
class RemovePlanes(_RotaryEdit):
    """Rotation planes made still (``θ_i → 0``: p-RoPE): by ``indices`` (0 the fastest), the ``slowest`` or
    ``fastest`` n, or every plane whose wavelength ``2π/θ_i`` lies in ``band`` = (min, max) positions."""

    indices: tuple[int, ...] = ()
    slowest: int = 0
    fastest: int = 0
    band: tuple[float, float] | None = None
    layer_type: str | None = None
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", _layer_tuple(self.layers))
        given = [bool(self.indices), bool(self.slowest), bool(self.fastest), self.band is not None]
        if sum(given) != 1:
            raise InvalidArgumentError(
                "RemovePlanes takes exactly one of indices=, slowest=, fastest= or band=; got "
                f"indices={self.indices!r}, slowest={self.slowest!r}, fastest={self.fastest!r}, band={self.band!r}."
            )
        for name in ("slowest", "fastest"):
            int_argument(name, getattr(self, name), 0)

    @property
    def label(self) -> str:
        if self.indices:
            what = f"rotation planes {list(self.indices)} removed"
        elif self.band is not None:
            what = f"rotation planes of wavelength {self.band[0]:g}..{self.band[1]:g} removed"
        else:
            what = f"the {self.slowest or self.fastest} {'slowest' if self.slowest else 'fastest'} rotation planes removed"
        return what + self._scope_label()

    @property
    def parameter(self) -> float:
        return float(self.slowest or self.fastest or len(self.indices))

    def planes(self, theta: torch.Tensor) -> list[int]:
        """The plane indices this edit stills, for frequencies ``theta`` ``(n_planes,)``."""
        n = theta.numel()
        order = torch.argsort(theta, descending=True).tolist()  # fastest first
        if self.indices:
            bad = [i for i in self.indices if not 0 <= i < n]
            if bad:
                raise InvalidArgumentError(f"plane indices {bad} are outside 0..{n - 1}.")
            return sorted(set(self.indices))
        if self.band is not None:
            wavelength = 2 * math.pi / theta
            return [i for i in range(n) if self.band[0] <= float(wavelength[i]) <= self.band[1]]
        count = self.slowest or self.fastest
        if count > n:
            raise InvalidArgumentError(f"cannot remove {count} planes: the model has {n}.")
        return sorted(order[-count:] if self.slowest else order[:count])

    def check(self, target: EditTarget) -> None:
        super().check(target)
        slots, _ = self.where(target)
        for slot in slots:
            self.planes(slot.inv_freq.detach().to("cpu", torch.float64))

    def apply(self, target: EditTarget) -> None:
        slots, layers = self.where(target)
        for slot in slots:  # each buffer's own planes (types may rotate with different frequencies)
            chosen = self.planes(slot.inv_freq.detach().to("cpu", torch.float64))

            def still(theta: torch.Tensor, chosen: list[int] = chosen) -> torch.Tensor:
                out = theta.clone()
                out[chosen] = 0.0
                return out

            target.set_frequencies(still, slots=[slot], layers=_layers_of(target, slot, layers))


def _layers_of(target: EditTarget, slot: Any, layers: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """Of ``layers``, those ``slot`` serves (all of them for a shared buffer); None when ``layers`` is None."""
    if layers is None or slot.layer_type is None:
        return layers
    kinds = target.layer_types() or []
    return tuple(i for i in layers if i < len(kinds) and kinds[i] == slot.layer_type)


@dataclass(frozen=True)
class ScaleFrequencies(_RotaryEdit):
    """Every frequency divided by ``factor`` (position interpolation: ``factor`` 2 fits 2× the positions), in
    every layer or in ``layer_type``'s / ``layers``' only."""

    factor: float
    layer_type: str | None = None
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", _layer_tuple(self.layers))
        from pos_geometry.encodings.rope_scaling import check_scaling_parameters

        if isinstance(self.factor, bool) or not isinstance(self.factor, int | float) or not self.factor > 0:
            raise InvalidArgumentError(f"factor must be a number > 0; got {self.factor!r}.")
        check_scaling_parameters("linear", {"factor": self.factor})  # the bounds a config's factor meets

    @property
    def label(self) -> str:
        return f"frequencies divided by {self.factor:g} (position interpolation)" + self._scope_label()

    @property
    def parameter(self) -> float:
        return float(self.factor)

    def apply(self, target: EditTarget) -> None:
        slots, layers = self.where(target)
        for slot in slots:
            target.set_frequencies(
                lambda theta: theta / self.factor, slots=[slot], layers=_layers_of(target, slot, layers)
            )


@dataclass(frozen=True)
class RopeScaling(_RotaryEdit):
    """A transformers rope type applied to the model's rope parameters (``{"rope_type": "yarn", "factor": 2}``;
    ``{"rope_type": "default", "rope_theta": 5e5}`` re-bases), its frequencies and attention scaling computed
    by transformers (``ROPE_INIT_FUNCTIONS``, or the rotary module's own default init), in every layer or in
    ``layer_type``'s / ``layers``' only."""

    parameters: Mapping[str, Any] = field(default_factory=dict)
    layer_type: str | None = None
    layers: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        object.__setattr__(self, "layers", _layer_tuple(self.layers))
        rope_type = dict(self.parameters).get("rope_type")
        if (rope_type not in ROPE_INIT_FUNCTIONS and rope_type != "default") or rope_type == "dynamic":
            known = sorted({"default", *ROPE_INIT_FUNCTIONS} - {"dynamic"})
            raise InvalidArgumentError(
                f"rope_type must be one of {known} (dynamic rescales with the running sequence length and is not a "
                f"fixed edit); got {rope_type!r}."
            )
        from pos_geometry.encodings.rope_scaling import check_scaling_parameters
        from pos_geometry.encodings.sinusoidal import check_base

        params = dict(self.parameters)
        check_scaling_parameters(str(rope_type), params)  # the rules a config's rope parameters meet
        if "rope_theta" in params:
            check_base(params["rope_theta"], "the edit's rope_theta")
        object.__setattr__(self, "parameters", tuple(sorted(params.items())))

    @property
    def label(self) -> str:
        return "rope " + ", ".join(f"{k}={v}" for k, v in self.parameters) + self._scope_label()

    @property
    def parameter(self) -> float | None:
        factor = dict(self.parameters).get("factor")
        return float(factor) if isinstance(factor, int | float) else None

    def frequencies(self, slot: Any) -> tuple[torch.Tensor, float]:
        """``(inv_freq, attention_scaling)`` of ``slot`` under these rope parameters (its module's own config,
        its layer type's parameters where the module keeps one set per type)."""
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        params = dict(self.parameters)
        module, kind = slot.module, slot.layer_type
        config = copy.deepcopy(module.config)
        current = config.rope_parameters or {}
        if kind is None:
            config.rope_parameters = {**current, **params}
        else:
            config.rope_parameters = {**current, kind: {**(current.get(kind) or {}), **params}}
        if params["rope_type"] == "default":
            init = getattr(type(module), "compute_default_rope_parameters", None)
            if init is None:
                raise NotApplicableError(
                    f"{type(module).__name__} has no default rope init of its own; a default rope_type cannot be set."
                )
        else:
            init = ROPE_INIT_FUNCTIONS[params["rope_type"]]
        kwargs = {"layer_type": kind} if kind is not None else {}
        try:
            inv_freq, scaling = init(config, device=slot.inv_freq.device, **kwargs)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise InvalidArgumentError(
                f"transformers refuses the rope parameters {params}: {type(exc).__name__}: {exc}"
            ) from None
        return inv_freq, scaling

    def check(self, target: EditTarget) -> None:
        super().check(target)
        for slot in self.where(target)[0]:
            self.frequencies(slot)

    def apply(self, target: EditTarget) -> None:
        slots, layers = self.where(target)
        for slot in slots:  # each buffer from its own module's config (and its layer type's parameters)
            inv_freq, scaling = self.frequencies(slot)
            target.set_frequencies(
                lambda _, f=inv_freq: f.to(torch.float64), scaling=scaling, slots=[slot],
                layers=_layers_of(target, slot, layers),
            )  # fmt: skip


@dataclass(frozen=True)
class SwapPairing(Edit):
    """The control that must hurt: within each head's rotated dimensions, query and key rows reordered (the same
    order for both) so every rotation plane turns two dimensions that were never trained as a pair. The
    unrotated dot product ``q·k`` is unchanged (a common permutation); only the rotation is wrong."""

    applies_to: ClassVar[str] = "rotary"
    rehearse: ClassVar[bool] = True

    @property
    def label(self) -> str:
        return "rotation pairing swapped (q/k rows reordered within each head)"

    def apply(self, target: EditTarget) -> None:
        from pos_geometry.interventions.pairing import swap_pairing

        swap_pairing(target)
