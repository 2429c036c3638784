"""Random draws shared by the nulls' samplers: Gaussian draws on the table's device, and the smooth part
of a squared-exponential Gaussian process by circulant embedding (Wood & Chan 1994)."""

from __future__ import annotations

import math

import torch

__all__ = ["circulant_spectrum", "fourier_draws", "gp_modes", "mode_variances", "randn"]


def randn(shape: tuple[int, ...], gen: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    """float32 Gaussian draws of ``shape`` from the stream ``gen``, in ``like``'s dtype and on its device.

    On the CPU they are drawn from ``gen`` itself: one seed gives the same surrogates for every dtype of the
    table. On an accelerator they are drawn there, from a device generator seeded by one draw of ``gen``
    (drawing tens of millions of numbers on the host and copying them over took a third of a GPU
    ``analyze``): the same seed gives the same surrogates on the same kind of device, and surrogates of the
    same distribution elsewhere (``tests/analysis/nulls/test_null_device.py`` compares the two nulls).
    """
    if like.device.type == "cpu":
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype=like.dtype)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    device_gen = torch.Generator(device=like.device).manual_seed(seed)
    return torch.randn(shape, generator=device_gen, dtype=torch.float32, device=like.device).to(like.dtype)


def circulant_spectrum(n: int, ell: float) -> tuple[int, torch.Tensor]:
    """``(M, λ)``: the squared-exponential kernel ``exp(-Δ²/2ℓ²)`` embedded in a circulant of size ``M``
    (a power of two ≥ ``2n`` and ≥ ``14ℓ``, so the kernel has fallen below 1e-10 before the wrap) and its
    eigenvalues ``λ`` ``(M/2 + 1,)`` (the real FFT of the kernel's first row; the few round-off negatives
    clipped to 0). Wood & Chan 1994: draws through this spectrum have exactly the kernel's covariance
    at the lags ``0..n−1`` that the table has."""
    m = 1 << max(1, math.ceil(math.log2(max(2 * n, 14 * ell, 2))))
    k = torch.arange(m, dtype=torch.float64)
    lag = torch.minimum(k, m - k)
    lam = torch.fft.rfft(torch.exp(-0.5 * (lag / ell) ** 2)).real.clamp_min(0)
    return m, lam


def mode_variances(lam: torch.Tensor, m: int, nugget: float) -> torch.Tensor:
    """The variances of the circulant's Fourier-mode weights ``(M/2 + 1,)``, the smooth share ``1 − η`` in.

    ``f_t = Σ_k (a_k cos(2πkt/M) + b_k sin(2πkt/M))`` over the real FFT's bins ``k = 0..M/2``, with ``a_k``,
    ``b_k`` of variance ``2λ_k/M`` inside and ``λ_k/M`` at 0 and ``M/2`` (``b_0 = b_{M/2} = 0``):
    ``Var(f_t) = Σ`` over all ``M`` bins of ``λ_k / M = k(0)``, ``Cov(f_s, f_t) = k(s − t)`` for ``|s − t| < M/2``.
    """
    var = lam * (1 - nugget) / m * 2
    var[0] /= 2
    var[-1] /= 2
    return var


def gp_modes(n: int, ell: float, nugget: float) -> torch.Tensor | None:
    """The smooth part of a GP draw as a basis: ``f = B a`` with ``B`` ``(n, 2K)`` float64 (the circulant's
    ``K`` Fourier modes above 1e-10 of the largest, cosines then sines, each times its weight's standard
    deviation, the smooth share ``1 − η`` in) and ``a`` iid standard normal; None when the modes are many
    (``4K > n``, a short length scale), where a basis would cost more than an FFT."""
    m, lam = circulant_spectrum(n, ell)
    var = mode_variances(lam, m, nugget)
    kept = int(torch.nonzero(lam > 1e-10 * lam.max()).max()) + 1
    if 4 * kept > n:
        return None
    t = torch.arange(n, dtype=torch.float64)
    wt = t[:, None] * (2 * math.pi * torch.arange(kept, dtype=torch.float64) / m)[None, :]
    amp = var[:kept].sqrt()
    return torch.cat([torch.cos(wt) * amp, torch.sin(wt) * amp], dim=1)


def fourier_draws(
    var: torch.Tensor, n: int, m: int, shape: tuple[int, int], gen: torch.Generator
) -> torch.Tensor:
    """``shape + (n,)`` draws ``f_t = Σ_k (a_k cos(2πkt/M) + b_k sin(2πkt/M))``, ``t < n``, with independent
    Gaussian weights of variances ``var`` ``(M/2 + 1,)`` (:func:`mode_variances`; ``b_0 = b_{M/2} = 0``), in
    ``var``'s dtype and on its device: one inverse real FFT of size ``M``. Weights past the last variance
    above 1e-13 of the largest are not drawn (a smooth kernel's spectrum falls off like a Gaussian: most of
    a short length scale's bins hold nothing; the FFT pads them with zeros), which leaves every covariance
    as it is to 1e-13 relative."""
    above = torch.nonzero(var > _NEGLIGIBLE * var.max())
    kept = int(above.max()) + 1 if above.numel() else 1
    half = var[:kept].sqrt() * (m / 2)
    # one draw of (re, im) pairs viewed as complex: no second draw, no copy into a complex tensor
    w = torch.view_as_complex(randn((*shape, kept, 2), gen, half))
    # irfft(w)·M = w_0 + Σ_inside 2 Re(w_k e^{2πikt/M}) + w_{M/2}(−1)^t: w_k = M(a − ib)/2 gives M(a cos + b sin)
    w.mul_(half)
    w[..., 0] = w[..., 0].real * 2
    if kept == var.shape[0]:  # the Nyquist bin is in
        w[..., -1] = w[..., -1].real * 2
    return torch.fft.irfft(w, n=m, dim=-1)[..., :n]


_NEGLIGIBLE = 1e-13
"""A Fourier weight's variance below this share of the largest is not drawn (:func:`fourier_draws`)."""
