"""The CLI's ``--edit`` specs: ``NAME`` or ``NAME:V1,V2,...`` (one edit per value: a sweep).

:data:`EDIT_SPECS` is the table of names (a new edit is a new row): ``rank:1,2,3,5,10``,
``helix``, ``shuffle:START``, ``mean``, ``shift:S``, ``planes-slow:N``, ``planes-fast:N``,
``scale:F``, ``rope:TYPE:FACTOR`` (``rope:yarn:2``), ``rebase:THETA``, ``swap``, ``identity``.

A rotary edit may end in ``@SCOPE``: ``@full_attention`` (one layer type) or ``@layers=0-3,6`` (some
layers): ``scale:2@full_attention``, ``planes-slow:4@layers=0-5``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Sequence

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.interventions.edits import (
    Edit,
    Helix,
    Identity,
    MeanTable,
    Rank,
    Shift,
    ShuffleRows,
)
from pos_geometry.interventions.rotary_edits import RemovePlanes, RopeScaling, ScaleFrequencies, SwapPairing

__all__ = ["EDIT_SPECS", "parse_edits"]

EDIT_SPECS: dict[str, tuple[Callable[[str], Edit] | None, Callable[[], Edit] | None, str]] = {
    "rank": (lambda v: Rank(int(v)), None, "rank:K,... the table's rank-K PCA reconstruction (learned)"),
    "helix": (None, Helix, "helix: the table's fitted helix (learned)"),
    "shuffle": (lambda v: ShuffleRows(int(v)), lambda: ShuffleRows(0), "shuffle[:START] rows START.. permuted (learned)"),
    "mean": (None, MeanTable, "mean: every row the table's mean (learned)"),
    "shift": (lambda v: Shift(int(v)), None, "shift:S,... position ids moved by S"),
    "planes-slow": (lambda v: RemovePlanes(slowest=int(v)), None, "planes-slow:N,... the N slowest planes stilled (rotary)"),
    "planes-fast": (lambda v: RemovePlanes(fastest=int(v)), None, "planes-fast:N,... the N fastest planes stilled (rotary)"),
    "scale": (lambda v: ScaleFrequencies(float(v)), None, "scale:F,... frequencies divided by F (rotary)"),
    "rope": (None, None, "rope:TYPE:FACTOR,... a transformers rope type, e.g. rope:yarn:2 (rotary)"),
    "rebase": (lambda v: RopeScaling({"rope_type": "default", "rope_theta": float(v)}), None,
               "rebase:THETA,... the rope base set to THETA (rotary)"),
    "swap": (None, SwapPairing, "swap: the rotation pairing swapped, the control that must hurt (rotary)"),
    "identity": (None, Identity, "identity: no edit (both passes must agree exactly)"),
}  # fmt: skip
"""name -> (edit from one value, edit without a value, help)."""


def _rope(rest: str) -> list[Edit]:
    rope_type, _, factors = rest.partition(":")
    if not factors:
        raise InvalidArgumentError(
            f"rope takes rope:TYPE:FACTOR[,FACTOR...] (e.g. rope:yarn:2); got 'rope:{rest}'."
        )
    return [RopeScaling({"rope_type": rope_type, "factor": float(f)}) for f in factors.split(",")]


def _scope(scope: str, spec: str) -> dict[str, object]:
    """``"full_attention"`` -> ``{"layer_type": ...}``; ``"layers=0-3,6"`` -> ``{"layers": (0, 1, 2, 3, 6)}``."""
    if not scope.startswith("layers="):
        if not scope.strip() or any(c in scope for c in " ,=:"):
            raise InvalidArgumentError(
                f"--edit {spec!r}: a scope is @LAYER_TYPE (e.g. @full_attention) or @layers=0-3,6; got {scope!r}."
            )
        return {"layer_type": scope}
    layers: list[int] = []
    for part in scope.removeprefix("layers=").split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            layers += list(range(int(lo), int(hi) + 1)) if dash else [int(lo)]
        except ValueError:
            raise InvalidArgumentError(
                f"--edit {spec!r}: layers= takes indices and ranges, e.g. layers=0-3,6; got {scope!r}."
            ) from None
    return {"layers": tuple(layers)}


def parse_edits(specs: Sequence[str]) -> list[Edit]:
    """``["rank:1,2,3", "swap"]`` -> ``[Rank(1), Rank(2), Rank(3), SwapPairing()]`` (module docstring)."""
    edits: list[Edit] = []
    for spec in specs:
        body, at, scope = spec.strip().partition("@")
        if at:
            found = len(edits)
            edits += parse_edits([body])
            fields = _scope(scope, spec)
            for i in range(found, len(edits)):
                if not any(f.name in fields for f in dataclasses.fields(edits[i])):
                    raise InvalidArgumentError(
                        f"--edit {spec!r}: @{scope} scopes a rotary frequency edit (planes-slow, planes-fast, scale, "
                        f"rope, rebase); {body!r} changes something else."
                    )
                edits[i] = dataclasses.replace(edits[i], **fields)
            continue
        name, _, rest = body.partition(":")
        row = EDIT_SPECS.get(name)
        if row is None:
            close = difflib.get_close_matches(name, EDIT_SPECS, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise InvalidArgumentError(
                f"unknown edit {name!r} in --edit {spec!r}.{hint} Known: "
                + "; ".join(help_ for _, _, help_ in EDIT_SPECS.values())
            )
        with_value, plain, help_ = row
        try:
            if name == "rope":
                edits += _rope(rest)
            elif rest:
                if with_value is None:
                    raise InvalidArgumentError(f"edit {name!r} takes no value; got {spec!r}. Usage: {help_}.")
                edits += [with_value(v) for v in rest.split(",") if v.strip()]
            elif plain is not None:
                edits.append(plain())
            else:
                raise InvalidArgumentError(f"edit {name!r} needs values; got {spec!r}. Usage: {help_}.")
        except InvalidArgumentError:
            raise
        except ValueError as exc:
            raise InvalidArgumentError(f"--edit {spec!r}: {exc}. Usage: {help_}.") from None
    if not edits:
        raise InvalidArgumentError("no edit given; pass --edit, e.g. --edit rank:1,2,3,5,10")
    return edits
