"""Power spectra of series and the backgrounds a peak must rise above: the tapered periodogram, AR(1)-plus-white
(red) noise fitted to a series' autocorrelations, and a local running-median background.
"""

from __future__ import annotations

import math

import torch

from pos_geometry.analysis._fourier import linear_detrend

__all__ = [
    "tapered_power",
    "ar1_plus_white",
    "ar1_from_lags",
    "ar1_white_spectrum",
    "red_background",
    "local_background",
    "LOCAL_WIDTHS",
]


def tapered_power(y: torch.Tensor, *, pad: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised power spectrum of series along the last axis: ``(..., F)`` and the periods ``(F,)``.

    Each series is linearly detrended, multiplied by a Hann taper (side lobes −31 dB instead of −13 dB)
    and zero-padded to ``pad × length`` before the rFFT; the DC bin is dropped and the power is divided
    by its sum, so each entry is the fraction of the series' (tapered) power at that frequency.
    Periods are in samples: ``pad·L / k``.
    """
    n = y.shape[-1]
    taper = torch.hann_window(n, periodic=False, dtype=y.dtype, device=y.device)
    spec = torch.fft.rfft(linear_detrend(y) * taper, n=pad * n, dim=-1)
    power = (spec.real**2 + spec.imag**2)[..., 1:]
    power = power / power.sum(dim=-1, keepdim=True).clamp_min(1e-300)
    k = torch.arange(1, power.shape[-1] + 1, dtype=y.dtype, device=y.device)
    return power, (pad * n) / k


def ar1_plus_white(c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(φ, ρ, var)`` of the AR(1)-plus-white model fitted to each centred series of ``c`` ``(..., L)``.

    For ``ρ``·AR(1)(φ) + ``(1 − ρ)``·white noise the lag-1 and lag-2 autocorrelations are ``r₁ = ρφ`` and
    ``r₂ = ρφ²``, so ``φ = r₂ / r₁`` (clipped to ``[0, 0.9999]``) and ``ρ = r₁² / r₂`` (clipped to ``[0, 1]``);
    a series where that does not hold (``r₂ ≤ 0`` or ``r₂ ≥ r₁``) is plain AR(1): ``φ = max(r₁, 0)``, ``ρ = 1``.
    ``var`` is the series' mean square.
    """
    var = (c * c).mean(dim=-1).clamp_min(torch.finfo(c.dtype).tiny)
    r1 = (c[..., 1:] * c[..., :-1]).mean(dim=-1) / var
    r2 = (c[..., 2:] * c[..., :-2]).mean(dim=-1) / var if c.shape[-1] > 2 else torch.zeros_like(r1)
    phi, red = ar1_from_lags(r1, r2)
    return phi, red, var


def ar1_from_lags(r1: torch.Tensor, r2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(φ, ρ)`` of the AR(1)-plus-white model with lag-1 and lag-2 autocorrelations ``r1``, ``r2`` (the rule of
    :func:`ar1_plus_white`)."""
    mixed = (r1 > 0) & (r2 > 0) & (r2 < r1)
    phi = torch.where(mixed, r2 / r1.clamp_min(1e-300), r1.clamp_min(0.0)).clamp(0.0, 0.9999)
    red = torch.where(mixed, (r1 * r1 / r2.clamp_min(1e-300)).clamp(0.0, 1.0), torch.ones_like(r1))
    return phi, red


def ar1_white_spectrum(phi: torch.Tensor, red: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """The AR(1)-plus-white spectrum ``ρ (1 − φ²) / (1 + φ² − 2φ cos 2πf) + (1 − ρ)`` at ``f`` cycles per
    sample (mean 1 over a whole period of ``f``: a process of variance 1)."""
    return red * (1 - phi**2) / (1 + phi**2 - 2 * phi * torch.cos(2 * math.pi * f)) + (1 - red)


def red_background(y: torch.Tensor, n_bins: int, *, pad: int) -> torch.Tensor:
    """The AR(1)-plus-white spectrum fitted to each series of ``y`` ``(..., L)``, on the bins of
    :func:`tapered_power`: ``(..., n_bins)``, normalised to sum to 1 like the power.

    Each series is linearly detrended; its lag-1 and lag-2 autocorrelations give ``φ = r₂ / r₁`` and a red
    share ``ρ = r₁² / r₂`` (plain AR(1), ``φ = r₁``, ``ρ = 1``, where that does not hold), and the background is
    ``ρ (1 − φ²) / (1 + φ² − 2φ cos 2πf) + (1 − ρ)`` at ``f = k / (pad · L)`` cycles per sample. The ratio
    of a series' power to its own background is flat for red or white noise and peaks at a period.
    """
    n = y.shape[-1]
    phi, red, _ = ar1_plus_white(linear_detrend(y))
    f = torch.arange(1, n_bins + 1, dtype=y.dtype, device=y.device) / (pad * n)
    spec = ar1_white_spectrum(phi[..., None], red[..., None], f)
    return spec / spec.sum(dim=-1, keepdim=True)


LOCAL_WIDTHS = (8, 16, 32, 64)
"""Half-widths (native bins) of :func:`local_background`'s running median: the smallest that reaches a
quarter of the bin's own index (so a line's width relative to its frequency, which is about the same for
a cluster of harmonics at any frequency, stays well inside the window)."""


def local_background(power: torch.Tensor, *, pad: int) -> torch.Tensor:
    """A running median of each spectrum of :func:`tapered_power` ``(..., F)``, on its scale: ``(..., F)``.

    The median is taken over the native Fourier bins (every ``pad``-th bin) within ``h`` native bins of
    each one, ``h`` the smallest of :data:`LOCAL_WIDTHS` that reaches a quarter of the bin's index (8 up to
    bin 32, 64 from bin 224; windows wider than 8 bins are evaluated every ``h/8`` bins and interpolated), the
    end bins repeated beyond the spectrum's ends, divided by ``ln 2`` (the
    median of an exponential variable is ``ln 2`` times its mean), and interpolated back onto every bin. A
    spectral line, or a cluster of them, is narrower than the window, so the median passes under it, while
    a smooth spectrum's shape (a Gaussian process's shoulder, which no AR(1) spectrum has) is followed.
    """
    native = power[..., pad - 1 :: pad]  # bins k·pad: the frequencies k / L
    lead, m = native.shape[:-1], native.shape[-1]
    med = torch.empty_like(native)
    for i, h in enumerate(LOCAL_WIDTHS):
        lo_bin = 0 if i == 0 else 4 * LOCAL_WIDTHS[i - 1]
        hi_bin = m if i == len(LOCAL_WIDTHS) - 1 else min(4 * h, m)
        if lo_bin >= m:
            break
        # wide windows move slowly: their medians are taken every h/8 bins and interpolated in between
        step = max(1, h // 8)
        stop = min(hi_bin + step, m)  # one centre at or past the segment's last bin
        padded = torch.cat(
            [native[..., :1].expand(*lead, h), native, native[..., -1:].expand(*lead, h)], dim=-1
        )
        coarse = padded[..., lo_bin : stop + 2 * h].unfold(-1, 2 * h + 1, step).median(dim=-1).values
        centres = lo_bin + step * torch.arange(coarse.shape[-1], device=power.device)
        where = torch.arange(lo_bin, hi_bin, device=power.device)
        k = ((where - lo_bin) // step).clamp(max=coarse.shape[-1] - 1)
        k1 = (k + 1).clamp(max=coarse.shape[-1] - 1)
        span = (centres[k1] - centres[k]).clamp_min(1).to(native.dtype)
        frac = ((where - centres[k]).to(native.dtype) / span).clamp(0, 1)
        med[..., lo_bin:hi_bin] = coarse[..., k] * (1 - frac) + coarse[..., k1] * frac
    med = med / math.log(2.0)
    # back onto every bin: bin j (frequency (j + 1) / (pad·L)) between native bins ⌊(j+1)/pad⌋ and the next
    pos = (torch.arange(power.shape[-1], device=power.device, dtype=power.dtype) + 1) / pad - 1
    lo = pos.floor().clamp(0, m - 1).long()
    hi = (lo + 1).clamp(max=m - 1)
    frac = (pos - lo.to(pos.dtype)).clamp(0, 1)
    return med[..., lo] * (1 - frac) + med[..., hi] * frac
