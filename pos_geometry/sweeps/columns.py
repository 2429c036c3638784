"""Helpers both kinds of sweep share, below both: which analyses a sweep runs, and the drift columns.

:func:`analysis_names` reads an ``analyses`` argument; :func:`drift_walk` compares each checkpoint with the
previous and the final one. :mod:`pos_geometry.sweeps.metrics` (learned tables) and
:mod:`pos_geometry.sweeps.rotary` (rotary models) import them from here, so neither imports the other
for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pos_geometry.errors import InvalidArgumentError

__all__ = ["analysis_names", "drift_walk"]


def analysis_names(
    analyses: Any, known: tuple[str, ...], cheap: tuple[str, ...], what: str = ""
) -> tuple[str, ...]:
    """The analysis names of ``analyses`` (``"all"``, ``"cheap"`` or a list), each one of ``known``."""
    if isinstance(analyses, str):
        named = {"all": known, "cheap": cheap}.get(analyses, (analyses,))
    elif isinstance(analyses, Sequence) and all(isinstance(a, str) for a in analyses):
        named = tuple(analyses)
    else:
        raise InvalidArgumentError(f"analyses must be 'all', 'cheap' or a list of names; got {analyses!r}.")
    unknown = [a for a in named if a not in known]
    if unknown or not named:
        raise InvalidArgumentError(
            f"analyses must be 'all', 'cheap' or a non-empty list from {list(known)}{what}; got {analyses!r}"
            + (f" ({unknown} unknown)." if unknown else ".")
        )
    return named


def drift_walk(items: Sequence[Any | None], names: Sequence[str], compare: Any) -> list[dict[str, Any]]:
    """Columns comparing each checkpoint with the previous one and with the final one, in sweep order.

    ``items[i]``: what checkpoint ``i`` is compared by (``None`` for failed checkpoints); ``compare(a,
    b)`` -> ``{column: value}`` of ``a`` against ``b``, its columns suffixed ``_previous`` and ``_final``.
    "previous" is the nearest earlier checkpoint that has an item, "final" the last one that has. Returns
    one dict per checkpoint (empty for failed ones); the first one's ``_previous`` columns are None.
    """
    have = [i for i, b in enumerate(items) if b is not None]
    out: list[dict[str, Any]] = [{} for _ in items]
    if not have:
        return out
    last = have[-1]
    prev: int | None = None
    for i in have:
        to_final = compare(items[i], items[last])
        row: dict[str, Any] = {f"{k}_final": v for k, v in to_final.items()}
        row["drift_final_revision"] = names[last]
        if prev is None:
            row |= {f"{k}_previous": None for k in to_final} | {"drift_previous_revision": None}
        else:
            row |= {f"{k}_previous": v for k, v in compare(items[i], items[prev]).items()}
            row["drift_previous_revision"] = names[prev]
        out[i] = row
        prev = i
    return out
