"""Fixed sinusoidal positional tables, in the two layouts models use.

``layout="interleaved"`` -- "Attention Is All You Need" (Vaswani et al., 2017):
``PE[p, 2i] = sin(p·ω_i)``, ``PE[p, 2i+1] = cos(p·ω_i)`` with ``ω_i = base^(-2i/d)``, ``i = 0..d/2-1``.

``layout="blocks"`` -- Whisper's encoder (``whisper.model.sinusoids``; also tensor2tensor's
``get_timing_signal_1d``): ``PE[p, i] = sin(p·ω_i)`` and ``PE[p, d/2 + i] = cos(p·ω_i)`` -- a block of sines,
then a block of cosines -- with ``ω_i = exp(-i·ln(base) / (d/2 - 1))``: the last frequency is exactly
``1/base``, so the frequencies differ from the 2017 rule's by up to ``base^(1/(d/2-1))`` (4.7% for
``d = 384``, ``base = 10000``).

Either way each frequency fills one sin/cos pair of columns, which traces a circle of period
``2π/ω_i`` positions.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pos_geometry._device import Device, resolve_device
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["LAYOUTS", "frequencies", "sinusoidal", "sinusoidal_table"]


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


LAYOUTS = ("interleaved", "blocks")


def frequencies(d_model: int, *, base: float = 10000.0, layout: str = "interleaved") -> torch.Tensor:
    """The angular frequencies ``ω_i`` (rad/position) ``(d_model/2,)`` of a layout, in float64."""
    half = d_model // 2
    if layout == "interleaved":
        return base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    if half < 2:
        raise InvalidArgumentError(
            f"the blocks layout needs d_model >= 4 (its rule divides by d_model/2 - 1); got {d_model}."
        )
    return torch.exp(-math.log(base) / (half - 1) * torch.arange(half, dtype=torch.float64))


def sinusoidal_table(
    n_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    device: Device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The sinusoidal table as a tensor ``(n_positions, d_model)`` in ``layout`` (see the module docstring).

    Angles are computed in float64 on the CPU, then the table is cast to ``dtype`` and
    moved to ``device``. ``d_model`` must be even (each frequency fills a sin/cos pair).
    """
    if layout not in LAYOUTS:
        raise InvalidArgumentError(
            f"layout must be one of {LAYOUTS} ('interleaved': Vaswani et al. 2017; 'blocks': Whisper's "
            f"[sin | cos] blocks); got {layout!r}."
        )
    n = positive_int("n_positions", n_positions)
    d = positive_int("d_model", d_model)
    if d % 2:
        raise InvalidArgumentError(
            f"d_model must be even for the sinusoidal table (columns come in sin/cos pairs); got {d}."
        )
    b = check_base(base)
    dev = resolve_device(device)
    positions = torch.arange(n, dtype=torch.float64)
    angles = positions[:, None] * frequencies(d, base=b, layout=layout)[None, :]  # (n, d/2)
    if layout == "blocks":
        table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    else:
        table = torch.empty(n, d, dtype=torch.float64)
        table[:, 0::2] = torch.sin(angles)
        table[:, 1::2] = torch.cos(angles)
    return table.to(device=dev, dtype=dtype)


_FORMULAS = {
    "interleaved": "formula: PE[p,2i]=sin(p/base^(2i/d)), PE[p,2i+1]=cos(p/base^(2i/d)) (Vaswani et al. 2017)",
    "blocks": "formula: PE[p,i]=sin(p·w_i), PE[p,d/2+i]=cos(p·w_i), w_i=exp(-i·ln(base)/(d/2-1)) (Whisper encoder)",
}


def sinusoidal(
    n_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    device: Device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> PositionalEmbedding:
    """A sinusoidal table as a :class:`PositionalEmbedding` (kind ``"sinusoidal"``).

    ``layout="interleaved"``: "Attention Is All You Need"; ``layout="blocks"``: Whisper's encoder (see the
    module docstring for both rules).

    >>> pe = sinusoidal(1024, 768)
    >>> pe.shape, pe.kind, pe.provenance.config_dict["base"]
    ((1024, 768), 'sinusoidal', 10000.0)
    >>> sinusoidal(1500, 384, layout="blocks").provenance.config_dict["layout"]
    'blocks'
    """
    matrix = sinusoidal_table(n_positions, d_model, base=base, layout=layout, device=device, dtype=dtype)
    provenance = Provenance(
        model_id="sinusoidal" if layout == "interleaved" else "sinusoidal-blocks",
        kind="sinusoidal",
        source=_FORMULAS[layout],
        config={
            "n_positions": int(n_positions),
            "d_model": int(d_model),
            "base": float(base),
            "layout": layout,
        },
        original_dtype="float64",
    )
    return PositionalEmbedding(matrix, provenance, check_finite=False)
