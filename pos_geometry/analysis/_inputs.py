"""Input coercion shared by every analysis function.

Every analysis entry point accepts one matrix or a batch:

* a :class:`PositionalEmbedding` (one matrix, provenance kept);
* a list/tuple of ``PositionalEmbedding`` of one shape (a batch, provenances kept);
* a tensor or array ``(n_positions, d_model)`` or ``(batch, n_positions, d_model)``.

:func:`as_batch` turns any of these into a ``(batch, n, d)`` tensor on the device the
input already lives on (nothing is moved), plus one provenance per matrix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import DeviceMismatchError, InvalidArgumentError, NonFiniteError

__all__ = ["Window", "Batch", "as_batch", "anonymous_provenance", "parse_window", "check_int", "check_level"]


def anonymous_provenance(shape: tuple[int, ...]) -> Provenance:
    """Provenance for a bare array: we know only that the user passed it in."""
    return Provenance(model_id="<array>", kind="learned", source=f"array of shape {tuple(shape)} passed in")


@dataclass(frozen=True, eq=False)
class Batch:
    """``data``: ``Float[Tensor, "batch n d"]``; ``provenances``: one per matrix; ``single``: input was 2-D."""

    data: torch.Tensor
    provenances: tuple[Provenance, ...]
    single: bool

    @property
    def provenance(self) -> Provenance | tuple[Provenance, ...]:
        """The provenance to store in a result: one for a single input, a tuple for a batch."""
        return self.provenances[0] if self.single else self.provenances


def _to_tensor(x: torch.Tensor | np.ndarray, name: str) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f" and x.dtype.itemsize > 8:  # np.longdouble: torch has no such dtype
            with np.errstate(over="ignore"):
                x = x.astype(np.float64)
        if x.dtype.kind != "f" or x.dtype.itemsize not in (2, 4, 8):
            raise InvalidArgumentError(
                f"{name} must be a real floating-point array (float16/32/64); got dtype {x.dtype}. "
                "Cast it with .astype(np.float32) if its values are positions' coordinates."
            )
        return torch.from_numpy(np.ascontiguousarray(x))
    return x


def _all_finite(data: torch.Tensor) -> bool:
    """Whether every entry of ``data`` ``(batch, n, d)`` is finite: one min/max pass without temporaries
    (min and max propagate NaN, and ±inf is the min or the max; ``torch.isfinite`` would allocate ``|x|``
    and two boolean masks of the batch's size, a quarter of a second for 64 GPT-2 tables)."""
    if data.numel() == 0:
        return True
    if data.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        return bool(torch.isfinite(data).all())
    lo, hi = torch.aminmax(data)
    return abs(lo.item()) < float("inf") and abs(hi.item()) < float("inf")


def check_int(name: str, value: Any, low: int, rule: str | None = None) -> int:
    """``value`` as an int ``>= low`` (numpy integers accepted), else :class:`InvalidArgumentError`."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InvalidArgumentError(f"{name} must be an integer {rule or f'>= {low}'}; got {value!r}.")
    return int(value)


def check_bool(name: str, value: Any, meaning: str) -> bool:
    """``value`` as a bool (numpy's accepted), else :class:`InvalidArgumentError` that says what it switches."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidArgumentError(f"{name} must be True or False ({meaning}); got {value!r}.")
    return bool(value)


def check_level(alpha: Any, n_surrogates: int) -> float:
    """``alpha`` as a float in (0, 1) that ``n_surrogates`` surrogates can reach.

    With ``S`` surrogates the smallest attainable Monte-Carlo p-value is ``1 / (S + 1)``; a level
    below it could never be met, so every test would silently come out "not significant".
    """
    if isinstance(alpha, bool) or not isinstance(alpha, int | float | np.floating) or not 0 < alpha < 1:
        raise InvalidArgumentError(
            f"alpha must be a level strictly between 0 and 1, e.g. 0.01; got {alpha!r}."
        )
    min_p = 1.0 / (n_surrogates + 1)
    if alpha < min_p:
        need = math.ceil(1.0 / alpha) - 1
        raise InvalidArgumentError(
            f"alpha={alpha} is below the smallest p-value {n_surrogates} surrogates can give, "
            f"1/(n_surrogates + 1) = {min_p:.4g}, so nothing could ever be significant; "
            f"use n_surrogates >= {need} or alpha >= {min_p:.4g}."
        )
    return float(alpha)


def as_batch(x, *, min_positions: int = 1, name: str = "x", check_finite: bool = True) -> Batch:
    """Coerce ``x`` to a :class:`Batch` of floating-point matrices, without moving devices.

    Integer/bool inputs are rejected; float16/bfloat16 are upcast to float32 (analysis needs it).
    ``check_finite=False`` leaves the NaN/inf check to the caller (:func:`refuse_non_finite`), for a
    caller that reads every entry anyway.
    """
    if isinstance(x, PositionalEmbedding):
        data, provs, single = x.matrix.unsqueeze(0), (x.provenance,), True
    elif (
        isinstance(x, Sequence)
        and not isinstance(x, str | bytes)
        and len(x) > 0
        and all(isinstance(e, PositionalEmbedding) for e in x)
    ):
        shapes = {e.shape for e in x}
        if len(shapes) != 1:
            raise InvalidArgumentError(
                f"a batch of embeddings must share one shape; got shapes {sorted(shapes)}. "
                "Use .rows(0, n) to bring them to a common number of positions, or analyse them one by one."
            )
        devices = {e.device for e in x}
        if len(devices) != 1:
            raise DeviceMismatchError(
                f"a batch of embeddings must live on one device; got {sorted(map(str, devices))}. "
                "Move them with .to(device) first."
            )
        dtypes = {e.dtype for e in x}
        dtype = torch.promote_types(*dtypes) if len(dtypes) > 1 else next(iter(dtypes))
        data = torch.stack([e.matrix.to(dtype) for e in x])
        provs, single = tuple(e.provenance for e in x), False
    elif isinstance(x, torch.Tensor | np.ndarray):
        t = _to_tensor(x, name)
        if t.ndim == 2:
            data, single = t.unsqueeze(0), True
        elif t.ndim == 3:
            data, single = t, False
        else:
            raise InvalidArgumentError(
                f"{name} must have shape (n_positions, d_model) or (batch, n_positions, d_model); "
                f"got shape {tuple(t.shape)}."
            )
        provs = tuple(anonymous_provenance(tuple(data.shape[1:])) for _ in range(data.shape[0]))
    else:
        raise InvalidArgumentError(
            f"{name} must be a PositionalEmbedding, a list of them, or a tensor/array of shape "
            f"(n, d) or (batch, n, d); got {type(x).__name__}."
        )
    if not data.is_floating_point() or data.is_complex():
        raise InvalidArgumentError(
            f"{name} must be real floating point; got dtype {data.dtype}. Cast it with .float()."
        )
    if data.dtype in (torch.float16, torch.bfloat16):
        data = data.float()
    if data.shape[1] < min_positions:
        raise InvalidArgumentError(
            f"{name} needs at least {min_positions} positions; got n_positions={data.shape[1]}."
        )
    if check_finite and data.numel() and data.device.type != "meta" and not _all_finite(data):
        refuse_non_finite(data, name)
    return Batch(data, provs, single)


def refuse_non_finite(data: torch.Tensor, name: str = "x") -> None:
    """Raise the :class:`NonFiniteError` for ``data`` ``(batch, n, d)``, which holds NaN or inf."""
    bad = int(sum(int((~torch.isfinite(m)).sum()) for m in data))
    raise NonFiniteError(
        f"{name} must be finite; it holds {bad} NaN/inf value(s). Analyses would return NaN; "
        "find where the table came from (provenance) and fix or drop the bad rows."
    )


Window = tuple[int | None, int | None] | None
"""What every ``window`` argument accepts: ``(start, stop)`` over positions (slice semantics; None is an open
end), or None for every position."""


def parse_window(window: Window, n_positions: int) -> tuple[int, int]:
    """Validate a position window ``(start, stop)`` (Python slice semantics, None = open end).

    Returns concrete ``(start, stop)`` with ``0 <= start < stop <= n_positions``. A bound past the table
    (``stop > n_positions``) is refused, never clipped.
    """
    if window is None:
        return 0, n_positions
    try:
        start, stop = window
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"window must be a pair (start, stop) over positions, e.g. (100, 1024); got {window!r}."
        ) from None
    for v in (start, stop):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | np.integer)):
            raise InvalidArgumentError(
                f"window must be a pair of integer positions (or None for an open end), e.g. (100, 1024); "
                f"got {window!r} with a {type(v).__name__}."
            )
    start = None if start is None else int(start)
    stop = None if stop is None else int(stop)
    for name, v in (("start", start), ("stop", stop)):
        if v is not None and not -n_positions <= v <= n_positions:
            raise InvalidArgumentError(
                f"window={window!r}: {name} {v} is past the table's {n_positions} positions (one rule: a window is "
                f"never clipped silently). Use -{n_positions} <= start < stop <= {n_positions}, or None for an open end."
            )
    a, b, _ = slice(start, stop).indices(n_positions)
    if b <= a:
        raise InvalidArgumentError(
            f"window={window!r} selects no positions of a table with n_positions={n_positions}; "
            "use 0 <= start < stop <= n_positions."
        )
    return a, b
