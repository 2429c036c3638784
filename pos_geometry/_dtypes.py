"""Dtype helpers: a dtype's name (``torch.float16`` -> ``"float16"``, for provenance, messages, file metadata), and
the precision a table was stored in, read from its values (:func:`storage_eps`, :func:`rounding_edge`)."""

from __future__ import annotations

import math

import torch

__all__ = ["dtype_name", "rounding_edge", "storage_eps"]


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float16`` -> ``"float16"``; ``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")


def storage_eps(data: torch.Tensor) -> float:
    """The relative precision ``data`` was stored in: that of the coarsest of bfloat16, float16 and its own
    floating dtype whose numbers hold every value exactly. Analyses upcast half-precision tables to float32, so
    the dtype alone would claim a float32 table's precision for a float16 checkpoint; its values say otherwise."""
    if not data.is_floating_point():
        return 1e-16
    own = float(torch.finfo(data.dtype).eps)
    finite = data[torch.isfinite(data)]
    if not finite.numel():
        return own
    for narrow in (torch.bfloat16, torch.float16):  # coarsest first
        info = torch.finfo(narrow)
        fits = float(info.eps) > own and float(finite.abs().max()) <= info.max
        if fits and torch.equal(finite.to(narrow).to(data.dtype), finite):
            return float(info.eps)
    return own


def rounding_edge(data: torch.Tensor, eps: float | None = None) -> float:
    """The largest singular value that rounding ``data`` ``(n, d)`` to its storage precision makes: the edge of
    the rounding noise's spectrum, in the units of ``data``.

    Rounding to relative precision ``eps`` (:func:`storage_eps`) adds errors uniform within half a unit in the
    last place, of standard deviation ``σ ≈ eps/(2√3)·rms(data)``; an ``n × d`` matrix of such errors has its
    largest singular value near ``σ(√n + √d)`` (Marchenko–Pastur). Directions of a table below this carry
    rounding, not signal. ``eps``: the storage precision when already known (else read from ``data``)."""
    n, d = data.shape
    rms = float(data.detach().to(torch.float64).pow(2).mean().sqrt())
    eps = storage_eps(data) if eps is None else eps
    return eps / (2 * math.sqrt(3)) * rms * (math.sqrt(n) + math.sqrt(d))
