"""Positional edits: small frozen descriptions of one change to how a model sees position.

Each edit says what it changes (:attr:`Edit.label`, recorded in every result's provenance) and
applies itself to an :class:`~pos_geometry.interventions.target.EditTarget` where the model computes
position: the learned table's weights, the rotary modules' ``inv_freq`` (transformers' own module,
through transformers' own rope-init functions for :class:`RopeScaling`), the query/key rows, or the
position ids of the forward. Nothing re-implements the model's forward pass. Edits compose with
``+`` (applied left to right).

Here: the base :class:`Edit` and :class:`Compose`; learned tables: :class:`Rank`, :class:`Helix`,
:class:`ShuffleRows`, :class:`MeanTable`; both kinds: :class:`Shift`, :class:`Identity`. The rotary edits
(:class:`~pos_geometry.interventions.rotary_edits.RemovePlanes` (p-RoPE), ``ScaleFrequencies`` (position
interpolation), ``RopeScaling`` (any transformers rope type), ``SwapPairing`` (the control that must hurt))
live in :mod:`~pos_geometry.interventions.rotary_edits`. :func:`parse_edits` reads the CLI's ``--edit`` specs.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def int_argument(name: str, value: Any, minimum: int) -> int:
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
        int_argument("k", self.k, 1)

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
        int_argument("start", self.start, 0)
        int_argument("random_state", self.random_state, 0)

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
        int_argument("offset", self.offset, 0)

    @property
    def label(self) -> str:
        return f"positions shifted by {self.offset}"

    @property
    def parameter(self) -> float:
        return float(self.offset)

    def apply(self, target: EditTarget) -> None:
        target.position_offset += self.offset


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
