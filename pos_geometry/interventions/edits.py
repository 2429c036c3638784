"""Positional edits: small frozen descriptions of one change to how a model sees position.

Each edit says what it changes (:attr:`Edit.label`, recorded in every result's provenance) and
applies itself to an :class:`~pos_geometry.interventions.target.EditTarget` where the model computes
position: the learned table's weights, the rotary modules' ``inv_freq`` (transformers' own module,
through transformers' own rope-init functions for :class:`RopeScaling`), the query/key rows, or the
position ids of the forward. Nothing re-implements the model's forward pass. Edits compose with
``+`` (applied left to right).

Learned tables: :class:`Rank`, :class:`Helix`, :class:`ShuffleRows`, :class:`MeanTable`. Rotary:
:class:`RemovePlanes` (p-RoPE), :class:`ScaleFrequencies` (position interpolation),
:class:`RopeScaling` (any transformers rope type), :class:`SwapPairing` (the control that must
hurt). Both: :class:`Shift`, :class:`Identity`. :func:`parse_edits` reads the CLI's ``--edit`` specs.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from pos_geometry.errors import InvalidArgumentError, NotApplicableError
from pos_geometry.interventions.target import EditTarget

__all__ = [
    "Edit",
    "Identity",
    "Rank",
    "Helix",
    "ShuffleRows",
    "MeanTable",
    "Shift",
    "RemovePlanes",
    "ScaleFrequencies",
    "RopeScaling",
    "SwapPairing",
    "Compose",
]


@dataclass(frozen=True)
class Edit:
    """One positional edit. ``applies_to``: ``"learned"``, ``"rotary"`` or ``"any"``."""

    applies_to: ClassVar[str] = "any"
    rehearse: ClassVar[bool] = False
    """Whether checking this edit means applying it once and undoing it (cheap edits whose refusals can only
    show when they touch the model: the pairing swap, the rotary buffers)."""

    @property
    def label(self) -> str:
        """A short description (``"rank 3 PCA reconstruction"``)."""
        raise NotImplementedError

    @property
    def parameter(self) -> float | None:
        """The number a sweep varies (k, planes removed, shift, factor), or None."""
        return None

    def check(self, target: EditTarget) -> None:
        """Raise :class:`NotApplicableError` when the model has no part this edit changes."""
        if self.applies_to != "any" and target.kind != self.applies_to:
            raise NotApplicableError(
                f"the edit {self.label!r} applies to {self.applies_to} position embeddings; {target.loaded.model_id!r} "
                f"({target.loaded.model_type}) uses {target.kind!r}."
            )

    def apply(self, target: EditTarget) -> None:
        """Make the change (undone by ``target.editing()``'s exit)."""
        raise NotImplementedError

    def __add__(self, other: Edit) -> Compose:
        if not isinstance(other, Edit):
            return NotImplemented
        left = self.edits if isinstance(self, Compose) else (self,)
        right = other.edits if isinstance(other, Compose) else (other,)
        return Compose(left + right)


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name} must be an int >= {minimum}; got {value!r}.")
    return value


@dataclass(frozen=True)
class Identity(Edit):
    """No change (the check that two passes of the same model agree exactly)."""

    @property
    def label(self) -> str:
        return "identity (no edit)"

    def apply(self, target: EditTarget) -> None:
        return None


def _centred_svd(table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(mean (1, d), u, s, vh)`` of the table centred over positions, float64 (as ``pg.pca`` centres)."""
    x = table.detach().to("cpu", torch.float64)
    mean = x.mean(0, keepdim=True)
    u, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
    return mean, u, s, vh


@dataclass(frozen=True)
class Rank(Edit):
    """The table replaced by its rank-``k`` PCA reconstruction ``mean + X_c V_k V_kᵀ`` (centred over positions)."""

    k: int
    applies_to: ClassVar[str] = "learned"

    def __post_init__(self) -> None:
        _int("k", self.k, 1)

    @property
    def label(self) -> str:
        return f"rank {self.k} PCA reconstruction of the table"

    @property
    def parameter(self) -> float:
        return float(self.k)

    def check(self, target: EditTarget) -> None:
        super().check(target)
        if self.k > min(target.table().shape):
            raise InvalidArgumentError(
                f"rank {self.k} exceeds the table's {min(target.table().shape)} components."
            )

    def apply(self, target: EditTarget) -> None:
        table = target.table()
        mean, u, s, vh = _centred_svd(table)
        if self.k > s.numel():
            raise InvalidArgumentError(f"rank {self.k} exceeds the table's {s.numel()} components.")
        target.set_table(mean + (u[:, : self.k] * s[: self.k]) @ vh[: self.k])


@dataclass(frozen=True)
class Helix(Edit):
    """The table replaced by its fitted helix: the top-``n_components`` PCA coordinates replaced by their
    least-squares fit to the helix model (:func:`~pos_geometry.fit_helix`'s frequencies, drift and centre),
    everything outside them dropped. Does not apply when the fit finds no helix frequency."""

    n_components: int = 3
    applies_to: ClassVar[str] = "learned"

    @property
    def label(self) -> str:
        return f"fitted helix in the top {self.n_components} PCs"

    def apply(self, target: EditTarget) -> None:
        from pos_geometry.analysis._helix_model import design, solve
        from pos_geometry.analysis.helix import fit_helix

        table = target.table()
        fit = fit_helix(table.detach().to("cpu", torch.float64), self.n_components, n_surrogates=0)
        if not len(fit.frequencies):
            raise NotApplicableError(f"the helix edit does not apply: the fit found no helix ({fit.reason}).")
        mean, u, s, vh = _centred_svd(table)
        z = (u[:, : self.n_components] * s[: self.n_components]).numpy()
        n = z.shape[0]
        t = torch.arange(n, dtype=torch.float64).numpy()
        tau = (t - t.mean()) / (
            n / 2
        )  # the helix model's drift coordinate (pos_geometry.analysis._helix_model)
        x = design(t, tau, list(fit.frequencies), drift=True)
        coef, _ = solve(z, x)
        fitted = torch.from_numpy(x @ coef)
        target.set_table(mean + fitted @ vh[: self.n_components])


@dataclass(frozen=True)
class ShuffleRows(Edit):
    """Rows ``start..n-1`` of the table permuted (one permutation drawn from ``random_state``)."""

    start: int = 0
    random_state: int = 0
    applies_to: ClassVar[str] = "learned"

    def __post_init__(self) -> None:
        _int("start", self.start, 0)
        _int("random_state", self.random_state, 0)

    @property
    def label(self) -> str:
        return f"rows {self.start}.. of the table shuffled (random_state {self.random_state})"

    @property
    def parameter(self) -> float:
        return float(self.start)

    def apply(self, target: EditTarget) -> None:
        table = target.table().detach().clone()
        n = table.shape[0]
        if self.start >= n:
            raise InvalidArgumentError(f"start {self.start} is past the table's {n} rows.")
        order = torch.randperm(n - self.start, generator=torch.Generator().manual_seed(self.random_state))
        table[self.start :] = table[self.start :][order.to(table.device)]
        target.set_table(table)


@dataclass(frozen=True)
class MeanTable(Edit):
    """Every row of the table replaced by the table's mean row (position information removed)."""

    applies_to: ClassVar[str] = "learned"

    @property
    def label(self) -> str:
        return "table replaced by its mean row"

    def apply(self, target: EditTarget) -> None:
        table = target.table().detach()
        target.set_table(table.mean(0, keepdim=True).expand_as(table))


@dataclass(frozen=True)
class Shift(Edit):
    """Every position id moved by ``offset`` (the model sees positions ``offset..offset+T-1``)."""

    offset: int

    def __post_init__(self) -> None:
        _int("offset", self.offset, 0)

    @property
    def label(self) -> str:
        return f"positions shifted by {self.offset}"

    @property
    def parameter(self) -> float:
        return float(self.offset)

    def apply(self, target: EditTarget) -> None:
        target.position_offset += self.offset


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
            _int(name, getattr(self, name), 0)

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


@dataclass(frozen=True)
class Compose(Edit):
    """Several edits applied left to right (``a + b``)."""

    edits: tuple[Edit, ...] = ()

    def __post_init__(self) -> None:
        if not self.edits or not all(isinstance(e, Edit) for e in self.edits):
            raise InvalidArgumentError(f"Compose takes a non-empty tuple of edits; got {self.edits!r}.")

    @property
    def label(self) -> str:
        return " + ".join(e.label for e in self.edits)

    @property
    def rehearse(self) -> bool:  # type: ignore[override]
        return any(e.rehearse for e in self.edits)

    def check(self, target: EditTarget) -> None:
        for e in self.edits:
            e.check(target)

    def apply(self, target: EditTarget) -> None:
        for e in self.edits:
            e.apply(target)
