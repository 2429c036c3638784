"""Periodicity of a positional table: similarity by offset, spectra, tested periods, sinusoidal columns.

For one matrix ``X`` ``(n, d)`` (rows = positions of the window) :func:`periodicity` computes, on the
device ``X`` lives on:

* ``similarity`` ``(n, n)``: cosine similarity between positions;
* ``mean_similarity`` ``(n,)``: the mean of each diagonal, i.e. the mean similarity at offset ``|i − j|``;
* ``toeplitz_score``: the fraction of the off-diagonal similarities' variance explained by a function of
  the offset alone (1 = a purely relative-position code);
* spectra: the normalised power (Hann taper, linear detrend, 8× zero padding; see ``_spectra.tapered_power``)
  of the mean-similarity curve over offsets ``1..n−1`` and of each of the top ``n_components`` PCA
  coordinates (from :func:`pos_geometry.analysis.pca.pca`);
* ``peaks``: up to ``n_peaks`` spectral peaks per series, each **refined by a least-squares sinusoid fit**
  (``c + s·t + a cos(wt) + b sin(wt)``, ``w`` searched within two bins of the peak and inside the band),
  with a standard error from the fit's covariance. A spectral peak's location is biased by up to +30% when
  fewer than two cycles fit the window; the least-squares period is not (< 0.1% for a pure sinusoid with
  ≥ 1 cycle; ``benchmarks/RESULTS.md`` has the table). Periods are always positive and inside the band
  ``[2, length / min_cycles]``: a peak whose fit runs into the long end is reported ``at_edge`` (its period
  is only known to be ≥ ``length / min_cycles``) with status ``"does not apply"``, never extrapolated. A
  peak whose fit runs out of its two bins towards a stronger line is that line's side lobe, not a period:
  it is not reported (so the reported peaks are a subset of the ``n_peaks`` strongest, and no period is
  called that the spectrum's strongest peaks did not already hold). The standard error of a principal coordinate's
  period is the fit's, scaled by the residual's spectrum beside the line (``_fourier.noise_colour``: a
  frequency's error is set by the noise at that frequency, and a learned table's residual is far from
  white); ± 1.96 ``period_std`` is a 95% interval, its coverage measured in ``benchmarks/bench_coverage.py``.
  The similarity by offset's peaks carry **no** error bar (``period_std`` is NaN): that curve is an average
  over pairs, its error neither white nor stationary (it grows with the offset as the pairs run out), and its
  mean is not exactly a sinusoid (a noisy helix's rows have varying norms); on noisy helices its fit's error
  bars, white or scaled, covered the true period 30–97% of the time depending on the setting, and its
  period was biased by about 1e-3 of itself, so a line is reported with the interval of a principal
  coordinate that shows it (:attr:`PeriodicityResult.dominant_periods`).
* columns: each column, as a function of position, fitted by ``c + a cos(wt) + b sin(wt)`` with ``w``
  searched; the fraction with R² ≥ ``column_r2_threshold`` and their periods.

**The nulls are red noise, random walks and smooth curves, not exchangeability.** A row permutation only
tests "is there any order"; a smooth curve without any period passes it, and PCA turns such a curve into
sinusoids. So the surrogates are whole tables of three families (:mod:`pos_geometry.analysis.nulls.surrogates`), each
pushed through the same pipeline (row normalisation, similarity by offset, PCA, tapered spectra):
AR(1)-plus-white red noise fitted to each principal axis (the red-noise background of spectral peak tests,
as in REDFIT), random walks made of the table's own steps, and smooth Gaussian-process curves with the
table's length scale and noise share (the helix test's null). Red noise alone is not enough: drawn axis by
axis in the PCA basis it cannot reproduce what PCA does to a high-dimensional random walk (cosines
``cos(πjt/n)`` with clean spectral peaks; against red noise alone a quarter of random walks of 768 columns
had a "period" at α = 0.01), and a smooth curve's spectrum falls off far faster than any AR(1) spectrum
(against red noise and walks, 6–7 of 60 GP tables had a "period" at α = 0.01).

The statistic. Each series' power ``P(f)`` is first divided by its own background ``E(f)``: the larger of
the AR(1)-plus-white spectrum fitted to it (which flattens red or white noise, whichever principal axis the
series is) and a running median of its spectrum over ±8 to ±64 Fourier bins, wider at higher frequencies
(``_spectra.local_background``: a line is a few bins wide, so the median passes under it, while the shoulder
of a smooth curve's spectrum, which no AR(1) spectrum has, is followed). Each family's surrogates give the
level of that ratio at every frequency, ``C_g(f)`` (their 95th percentile over that of a whitened bin; ≈ 1
where ``E`` fits the family); the background is raised to ``max(1, C_g(f))`` over the families, and a
series' statistic is ``P(f) / (E(f) · max(1, C_g(f)))``: a peak is a local maximum of it. Against each
family the p-value of a peak is ``(1 + #{surrogates whose largest ratio, over every series and frequency in
the band, ≥ the peak's}) / (1 + n_surrogates)`` (the Westfall–Young max-T step, family-wise over every
reported peak); a surrogate's own ratio is left out of its family's level, so it is judged against a
background it did not make, as the table is. The reported p-value is the largest over the families: a period
must beat all three. The smallest reachable p-value is ``1 / (1 + n_surrogates)``; an ``alpha`` below it is
an error.
(Phase randomisation would keep the very spectrum under test, so it could not reject a peak.)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from pos_geometry import _progress
from pos_geometry._limits import check_positions
from pos_geometry._progress import Progress
from pos_geometry.analysis._batch import BatchResult, pca_items, renamed
from pos_geometry.analysis._fourier import (
    best_sinusoid,
    mean_similarity_fft,
    refine_period,
    work_dtype,
)
from pos_geometry.analysis._inputs import Window, as_batch, check_int, check_level, parse_window
from pos_geometry.analysis._period_results import LINE_BINS, PeriodicityResult, PeriodPeak
from pos_geometry.analysis._spectra import tapered_power
from pos_geometry.analysis.leverage import dominance_note
from pos_geometry.analysis.nulls.basis import check_null_method
from pos_geometry.analysis.nulls.period import against_nulls, whitened
from pos_geometry.analysis.nulls.surrogates import surrogate_values
from pos_geometry.analysis.pca import PCAResult, surrogate_coordinates
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["LINE_BINS", "PERIODICITY_NULLS", "PeriodPeak", "PeriodicityResult", "periodicity"]

PERIODICITY_NULLS = ("red_noise", "step_walk", "smooth_gp")

_PAD = 8


def _offset_means(s: torch.Tensor, offset_index: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Mean of each diagonal of ``s`` ``(..., n, n)`` → ``(..., n)``."""
    flat = s.reshape(*s.shape[:-2], -1)
    idx = offset_index.reshape(-1).expand_as(flat)
    return (
        torch.zeros(*s.shape[:-2], counts.shape[0], dtype=s.dtype, device=s.device).scatter_add_(
            -1, idx, flat
        )
        / counts
    )


def _peaks(power: torch.Tensor, band: torch.Tensor, n_peaks: int) -> list[int]:
    """Indices of the ``n_peaks`` strongest local maxima in ``band``, at least two native bins apart."""
    p = power.clone()
    p[~band] = -1.0
    is_max = torch.zeros_like(band)
    is_max[1:-1] = (p[1:-1] >= p[:-2]) & (p[1:-1] >= p[2:]) & band[1:-1]
    out: list[int] = []
    for i in torch.argsort(p, descending=True).tolist():
        if len(out) == n_peaks or p[i] < 0:
            break
        if is_max[i] and all(abs(i - j) >= 2 * _PAD for j in out):
            out.append(i)
    return out


def _analyse(
    x, coords, prov, window, *, n_surrogates, random_state, alpha, n_peaks, min_cycles, threshold, k, method
):
    n, dev = x.shape[0], x.device
    dt = work_dtype(dev)
    # Every statistic here is scale-free: work in units of the largest entry (a float32 table x 1e20
    # would overflow its squares, one x 1e-30 underflow them).
    rows = x  # the nulls scale their own copy (and reuse the decomposition the other analyses made)
    x = x / x.detach().abs().amax().clamp_min(torch.finfo(x.dtype).tiny)
    coords = coords / coords.detach().abs().amax().clamp_min(torch.finfo(coords.dtype).tiny)
    xw = x.to(dt)
    xn = xw / torch.linalg.vector_norm(xw, dim=1, keepdim=True).clamp_min(torch.finfo(dt).tiny)
    sim = xn @ xn.T
    pos = torch.arange(n, device=dev)
    offset_index = (pos[:, None] - pos[None, :]).abs()
    counts = torch.bincount(offset_index.reshape(-1), minlength=n).to(dt)
    mean_sim = _offset_means(sim, offset_index, counts)
    off = offset_index > 0
    resid = (sim - mean_sim[offset_index])[off]
    total = sim[off] - sim[off].mean()
    toeplitz = float(1 - (resid @ resid) / (total @ total)) if float(total @ total) > 0 else 1.0

    z = coords.to(dt).T  # (c, n)
    p_off, per_off = tapered_power(mean_sim[1:], pad=_PAD)
    p_pc, per_pc = tapered_power(z, pad=_PAD)
    band_off = (per_off <= (n - 1) / min_cycles) & (per_off >= 2)
    band_pc = (per_pc <= n / min_cycles) & (per_pc >= 2)

    # The statistic and its background: see the module docstring and _period_nulls.
    band = torch.cat([band_off, band_pc.expand(k, -1).reshape(-1)]).cpu().numpy()

    def spectra(batch: torch.Tensor) -> torch.Tensor:
        ms = mean_similarity_fft(batch).to(dt)[:, 1:]
        zs = surrogate_coordinates(batch, k, random_state=random_state).to(dt).transpose(1, 2)  # (c, k, n)
        return whitened(ms, zs, pad=_PAD).float()

    null_power = {
        null: surrogate_values(
            rows, null, n_surrogates, random_state + i, spectra, method=method, n_components=k
        )[:, band]
        for i, null in enumerate(PERIODICITY_NULLS)
    }  # each (S, bins in the band)
    observed = whitened(mean_sim[1:][None], z[None], pad=_PAD)[0].cpu().double().numpy()
    ratio_all, null_max = against_nulls(observed, null_power, band, [p_off.shape[0]] + [p_pc.shape[1]] * k)
    obs_off, obs_pc = ratio_all[: p_off.shape[0]], ratio_all[p_off.shape[0] :].reshape(k, -1)

    def p_value(ratio: float) -> float:  # a period must beat every null: the largest p
        return max(
            (1 + int((v >= ratio - 1e-12 * ratio).sum())) / (n_surrogates + 1) for v in null_max.values()
        )

    peaks = []
    series = [("mean_similarity", p_off, obs_off, band_off, mean_sim[1:])] + [
        (f"PC{i + 1}", p_pc[i], obs_pc[i], band_pc, z[i]) for i in range(p_pc.shape[0])
    ]
    for j, (name, pw, ratio, band, values) in enumerate(series):
        length = values.shape[0]
        y = values.detach().cpu().double().numpy()
        t = np.arange(length, dtype=np.float64) + (1.0 if j == 0 else 0.0)
        w_lo, w_hi = 2 * math.pi * min_cycles / length, math.pi
        for i in _peaks(torch.from_numpy(ratio), band.cpu(), n_peaks):
            w0 = min(max(2 * math.pi * (i + 1) / (_PAD * length), w_lo), w_hi)
            w, w_std, edge, off_peak = refine_period(y, t, w0, w_lo, w_hi)
            if off_peak:
                continue  # a side lobe of a stronger line (its fit runs out of the peak towards it)
            pv = p_value(float(ratio[i]))
            period = 2 * math.pi / w
            if j == 0:
                w_std = math.nan  # the similarity by offset gets no error bar (module docstring)
            reason = (
                f"the fit runs into the longest period searched ({length / min_cycles:.0f} = length/min_cycles): "
                f"the period, if any, is ≥ {length / min_cycles:.0f} positions"
                if edge
                else ""
            )
            peaks.append(
                PeriodPeak(
                    name,
                    period,
                    2 * math.pi * w_std / w**2,
                    float(pw[min(max(round(w * _PAD * length / (2 * math.pi)) - 1, 0), pw.shape[0] - 1)]),
                    pv,
                    pv <= alpha and not edge,
                    at_edge=edge,
                    status="does not apply" if edge else "period",
                    reason=reason,
                    ratio=float(ratio[i]),
                )
            )
    peaks.sort(key=lambda p: (p.at_edge, p.p_value - p.power_fraction * 1e-9))

    t = torch.arange(window[0], window[1], dtype=dt, device=dev)
    w, r2 = best_sinusoid(xw, t, min_turns=min_cycles)
    return PeriodicityResult(
        similarity=sim.to(x.dtype),
        mean_similarity=mean_sim,
        toeplitz_score=toeplitz,
        offset_spectrum=p_off,
        offset_periods=per_off,
        pc_spectrum=p_pc,
        pc_periods=per_pc,
        peaks=tuple(peaks),
        column_periods=2 * math.pi / w,
        column_r2=r2,
        column_r2_threshold=threshold,
        column_fraction=float((r2 >= threshold).to(dt).mean()),
        n_surrogates=n_surrogates,
        random_state=random_state,
        alpha=alpha,
        null=" and ".join(PERIODICITY_NULLS),
        null_method=method,
        null_values=null_max,
        offset_ratio=torch.from_numpy(obs_off).to(dev),
        pc_ratio=torch.from_numpy(obs_pc).to(dev),
        min_p_value=1.0 / (n_surrogates + 1),
        window=window,
        n_positions=n,
        provenance=prov,
    )


def _rank(ratios: Any, k: int) -> int:
    """``k``, or fewer: components holding ≤ 1e-10 of the variance are round-off, whose spectra (and their
    surrogates') would be noise, so they are not tested (a rank-2 circle has PC1 and PC2, no PC3)."""
    real = int((np.asarray(ratios, dtype=np.float64) > 1e-10).sum())
    return max(1, min(k, real))


def _windowed(prov: Provenance, start: int, stop: int, n: int) -> Provenance:
    """The input's provenance with the window recorded (similarities use the raw, uncentred rows)."""
    return prov if (start, stop) == (0, n) else prov.with_processing(f"rows[{start}:{stop}]")


def _fitted(res: PCAResult, window: Any) -> tuple[list[torch.Tensor], list[Provenance], tuple[int, int], int]:
    """The rows, provenances and window a centred ``PCAResult`` was fitted on (no second decomposition)."""
    if window is not None:
        raise InvalidArgumentError(
            f"window={window!r} cannot be applied to a PCAResult, which was fitted on window {tuple(res.window)}; "
            "pass the embedding instead, or fit pca(..., window=...) on the window you want."
        )
    if res.fitted_rows is None or not res.center:
        raise InvalidArgumentError(
            "periodicity needs a PCAResult centred over positions that still holds its fitted rows "
            f"(center={res.center}, fitted rows {'absent' if res.fitted_rows is None else 'present'}); "
            "pass the table itself, or a result of pca(table, window=..., center=True)."
        )
    rows = [r.fitted_rows for r in (res[i] for i in range(len(res)))]
    provs = [r.provenance for r in (res[i] for i in range(len(res)))]
    start, stop = (int(v) for v in res.window)
    return rows, provs, (start, stop), stop - start


def periodicity(
    x: Any,
    *,
    window: Window = None,
    n_components: int = 3,
    n_surrogates: int = 199,
    random_state: int = 0,
    alpha: float = 0.01,
    n_peaks: int = 3,
    min_cycles: float = 1.0,
    column_r2_threshold: float = 0.9,
    null_method: str = "fast",
    progress: Progress = None,
    **deprecated: Any,
) -> PeriodicityResult | BatchResult:
    """Similarity-by-offset, spectra, dominant periods tested against three null families, and sinusoidal columns.

    ``x``: a ``PositionalEmbedding``, a list of them, or a tensor/array ``(n, d)`` / ``(batch, n, d)``.
    ``window``: ``(start, stop)`` positions analysed. ``n_components``: PCA coordinates whose spectra are
    tested (at most the table's rank: components with ≤ 1e-10 of the variance are round-off, not tested). ``n_surrogates``/``random_state``: tables per null family (red noise, random walks, smooth GP curves; see the module docstring).
    ``alpha``: family-wise level at which a peak is called significant; it must be reachable
    (``alpha >= 1 / (n_surrogates + 1)``). ``min_cycles``: the longest period considered is series length /
    ``min_cycles`` (also the longest column period searched). ``null_method``: ``"fast"`` (the null
    tables in the table's leading principal subspace) or ``"exact"`` (whole tables, the reference; see
    :mod:`pos_geometry.analysis.nulls.basis`). ``progress``: a bar of the surrogates done, on stderr (None:
    in a terminal or Jupyter; True/False: always/never; a callable: called with ``(done, total)`` instead). ``n_pcs=`` and ``seed=`` are deprecated
    aliases of ``n_components`` and ``random_state``.
    Returns a :class:`PeriodicityResult`, or a ``BatchResult`` of them for a batch.
    """
    args = renamed(
        "periodicity",
        deprecated,
        {"n_pcs": "n_components", "seed": "random_state"},
        {"n_components": n_components, "random_state": random_state},
    )
    n_components, random_state = args["n_components"], args["random_state"]
    n_components = check_int("n_components", n_components, 1)
    n_surrogates = check_int("n_surrogates", n_surrogates, 1)
    n_peaks = check_int("n_peaks", n_peaks, 1)
    random_state = check_int("random_state", random_state, 0, ">= 0 (a seed)")
    alpha = check_level(alpha, n_surrogates)
    null_method = check_null_method(null_method)
    if isinstance(min_cycles, bool) or not (isinstance(min_cycles, int | float) and min_cycles > 0):
        raise InvalidArgumentError(
            f"min_cycles must be a positive number of cycles per window; got {min_cycles!r}."
        )
    if isinstance(column_r2_threshold, bool) or not (
        isinstance(column_r2_threshold, int | float) and 0 < column_r2_threshold <= 1
    ):
        raise InvalidArgumentError(f"column_r2_threshold must be in (0, 1]; got {column_r2_threshold!r}.")
    if isinstance(x, PCAResult):
        rows, provs, (start, stop), n_total = _fitted(x, window)
    else:
        batch = as_batch(x, min_positions=8)
        n_total = batch.data.shape[1]
        start, stop = parse_window(window, n_total)
        rows = [batch.data[i, start:stop] for i in range(batch.data.shape[0])]
        provs = [_windowed(p, start, stop, n_total) for p in batch.provenances]
    if stop - start < 8:
        raise InvalidArgumentError(
            f"periodicity needs at least 8 positions in the window; got {stop - start} (window {(start, stop)})."
        )
    check_positions("periodicity", stop - start)
    n_components = min(n_components, rows[0].shape[1], stop - start)
    if isinstance(x, PCAResult):
        n_components = min(n_components, x.n_components_)
    items, single = pca_items(x, n_components, window=None if isinstance(x, PCAResult) else (start, stop))
    with _progress.task(
        "periodicity nulls", len(PERIODICITY_NULLS) * n_surrogates * len(items), show=progress
    ):
        results = []
        for row, it, prov in zip(rows, items, provs, strict=True):
            k = _rank(it.explained_variance_ratio, n_components)
            found = _analyse(
                row,
                it.coords[:, :k],
                prov,
                (start, stop),
                n_surrogates=n_surrogates,
                random_state=random_state,
                alpha=alpha,
                n_peaks=n_peaks,
                min_cycles=float(min_cycles),
                threshold=float(column_r2_threshold),
                k=k,
                method=null_method,
            )
            note = dominance_note(it.coords, it.positions)
            results.append(dataclasses.replace(found, outlier_rows=note) if note else found)
    return results[0] if single else BatchResult(tuple(results), tuple(r.provenance for r in results))
