"""The fixed sinusoidal positional table of "Attention Is All You Need" (Vaswani et al., 2017).

``PE[p, 2i] = sin(p / base^(2i/d))`` and ``PE[p, 2i+1] = cos(p / base^(2i/d))`` for
positions ``p = 0..n_positions-1`` and ``i = 0..d/2-1``: column pair ``(2i, 2i+1)`` traces
a circle of period ``2π·base^(2i/d)`` positions.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pos_geometry._device import resolve_device
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["sinusoidal", "sinusoidal_table"]


def positive_int(name: str, value: Any) -> int:
    """``value`` as an int >= 1, else :class:`InvalidArgumentError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"{name} must be a positive int; got {value!r}.")
    return int(value)


def check_base(base: Any, what: str = "base") -> float:
    """``base`` as a finite float > 1 (the wavelength scale), else :class:`InvalidArgumentError`."""
    if isinstance(base, bool) or not isinstance(base, int | float) or not math.isfinite(base) or base <= 1:
        raise InvalidArgumentError(
            f"{what} must be a finite number > 1 (10000 in most models); got {base!r}."
        )
    return float(base)


def sinusoidal_table(
    n_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The sinusoidal table as a tensor ``(n_positions, d_model)``.

    Angles are computed in float64 on the CPU, then the table is cast to ``dtype`` and
    moved to ``device``. ``d_model`` must be even (each frequency fills a sin/cos pair).
    """
    n = positive_int("n_positions", n_positions)
    d = positive_int("d_model", d_model)
    if d % 2:
        raise InvalidArgumentError(
            f"d_model must be even for the sinusoidal table (columns come in sin/cos pairs); got {d}."
        )
    b = check_base(base)
    dev = resolve_device(device)
    positions = torch.arange(n, dtype=torch.float64)
    inv_wavelength = b ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    angles = positions[:, None] * inv_wavelength[None, :]  # (n, d/2)
    table = torch.empty(n, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.to(device=dev, dtype=dtype)


def sinusoidal(
    n_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> PositionalEmbedding:
    """The "Attention Is All You Need" table as a :class:`PositionalEmbedding` (kind ``"sinusoidal"``).

    >>> pe = sinusoidal(1024, 768)
    >>> pe.shape, pe.kind, pe.provenance.config_dict["base"]
    ((1024, 768), 'sinusoidal', 10000.0)
    """
    matrix = sinusoidal_table(n_positions, d_model, base=base, device=device, dtype=dtype)
    provenance = Provenance(
        model_id="sinusoidal",
        kind="sinusoidal",
        source="formula: PE[p,2i]=sin(p/base^(2i/d)), PE[p,2i+1]=cos(p/base^(2i/d)) (Vaswani et al. 2017)",
        config={"n_positions": int(n_positions), "d_model": int(d_model), "base": float(base)},
        original_dtype="float64",
    )
    return PositionalEmbedding(matrix, provenance, check_finite=False)
