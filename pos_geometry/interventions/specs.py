"""The CLI's ``--edit`` specs: ``NAME`` or ``NAME:V1,V2,...`` (one edit per value: a sweep).

:data:`EDIT_SPECS` is the table of names (a new edit is a new row): ``rank:1,2,3,5,10``,
``helix``, ``shuffle:START``, ``mean``, ``shift:S``, ``planes-slow:N``, ``planes-fast:N``,
``scale:F``, ``rope:TYPE:FACTOR`` (``rope:yarn:2``), ``swap``, ``identity``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.interventions.edits import (
    Edit,
    Helix,
    Identity,
    MeanTable,
    Rank,
    RemovePlanes,
    RopeScaling,
    ScaleFrequencies,
    Shift,
    ShuffleRows,
    SwapPairing,
)

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


def parse_edits(specs: Sequence[str]) -> list[Edit]:
    """``["rank:1,2,3", "swap"]`` -> ``[Rank(1), Rank(2), Rank(3), SwapPairing()]`` (module docstring)."""
    edits: list[Edit] = []
    for spec in specs:
        name, _, rest = spec.strip().partition(":")
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
