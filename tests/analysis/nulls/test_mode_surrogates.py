"""The fast smooth-GP and stationary surrogates (``analysis/nulls/mode_surrogates.py``) are the surrogates, up to
an isometry, less a bounded share of their variance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter1d

from pos_geometry.analysis.nulls.basis import (
    FAST_VARIANCE,
    _decomposition,
    _likelihood_axes,
    _spectrum,
    null_basis,
)
from pos_geometry.analysis.nulls.draws import fourier_draws, randn
from pos_geometry.analysis.nulls.mode_surrogates import ModeFactors, gp_factors, stationary_factors
from pos_geometry.analysis.nulls.stationary import toeplitz_kernel


def _factors(n: int = 96, big_r: int = 40, r: int = 5) -> ModeFactors:
    rng = np.random.default_rng(0)
    t = np.arange(n)[:, None] * np.arange(1, 5)[None, :] * 2 * np.pi / n
    modes = torch.from_numpy(np.concatenate([np.cos(t), np.sin(t)], axis=1) * 0.3)  # (n, 2K = 8)
    return ModeFactors(
        modes=modes,
        scales=torch.from_numpy(np.geomspace(2.0, 0.01, big_r)),
        mean_in=torch.from_numpy(rng.standard_normal(big_r)),
        mean_out=0.7,
        white=0.1,
        white_rank=r,
    )


def test_tables_have_the_rows_inner_products_of_the_whole_surrogates():
    f = _factors()
    like = torch.empty(0, dtype=torch.float64)
    fast = f.tables(3, torch.Generator().manual_seed(4), like)
    # the same draws, the whole way: Y = B A diag(σ) + white on the first r axes + mean, and the mean outside
    gen = torch.Generator().manual_seed(4)
    n, k2 = f.modes.shape
    big_r, r = f.scales.shape[0], f.white_rank
    weights = randn((3, big_r, k2), gen, like).mT * f.scales  # drawn axis by axis
    whole = torch.zeros(3, n, big_r + 1, dtype=torch.float64)
    whole[..., :big_r] = f.modes @ weights + f.mean_in
    whole[..., :r] += f.white * randn((3, r, n), gen, like).mT * f.scales[:r]
    whole[..., big_r] = f.mean_out
    assert fast.shape == (3, n, k2 + r + 1)
    torch.testing.assert_close(fast @ fast.mT, whole @ whole.mT, rtol=1e-10, atol=1e-10)


def test_tables_written_into_a_wider_buffer_are_the_same_tables_with_zero_columns():
    f = _factors()
    like = torch.empty(0, dtype=torch.float64)
    alone = f.tables(3, torch.Generator().manual_seed(4), like)
    buf = torch.full((5, f.width + 4, f.modes.shape[0]), float("nan"), dtype=torch.float64)
    into = f.tables(3, torch.Generator().manual_seed(4), like, out=buf[1:4])
    assert into.data_ptr() == buf[1:4].data_ptr() and into.shape == (3, f.modes.shape[0], f.width + 4)
    torch.testing.assert_close(into[..., : f.width], alone, rtol=0, atol=0)
    assert bool((into[..., f.width :] == 0).all()) and bool(buf[0].isnan().all() and buf[4].isnan().all())


@pytest.mark.parametrize("method", ["fast", "exact"])  # the mode surrogates' buffer, and a copy into it
def test_the_smooth_gp_nodes_fill_one_buffer_as_they_would_be_joined(gpt2_wpe, method):
    # several length-scale nodes per chunk: the table a chunk hands over is each node's own tables (drawn as
    # that node would alone, from the same generator state), in node order, zero columns past each one's width
    from pos_geometry.analysis.nulls import surrogates

    x = torch.from_numpy(gpt2_wpe[:256, :96].copy())
    alone, handed = [], []
    real = surrogates._maker

    def watched(*args):
        make, width, depth = real(*args)

        def make_watched(count, gen, out=None):
            twin = torch.Generator().manual_seed(0)
            twin.set_state(gen.get_state())
            alone.append(make(count, twin))  # what this node draws without a buffer
            return make(count, gen, out)

        return make_watched, width, depth

    def keep(t):
        handed.append(t.clone())
        return t.sum(dim=(1, 2))

    surrogates._maker = watched
    try:
        surrogates.surrogate_values(x, "smooth_gp", 12, 7, keep, method=method, workers=1)
    finally:
        surrogates._maker = real
    assert len(handed) >= 1 and not handed[0].is_contiguous()  # one buffer's transposed view
    nodes = len(surrogates.length_scale_nodes(x))
    assert nodes > 1 and sum(min(nodes, t.shape[0]) for t in handed) == len(alone)
    at = 0
    for table in handed:
        parts = alone[at : at + min(nodes, table.shape[0])]  # a node with no table in a chunk draws none
        joined = torch.cat([torch.nn.functional.pad(p, (0, table.shape[-1] - p.shape[-1])) for p in parts])
        at += len(parts)
        assert joined.shape == table.shape
        torch.testing.assert_close(joined @ joined.mT, table @ table.mT, rtol=1e-12, atol=1e-12)


def test_gpt2_surrogates_are_narrow_and_leave_out_little(gpt2_wpe):
    # GPT-2's null covariance needs 561 of 768 axes for 99.9% of its variance; the smooth part of all of
    # them fits in 2K + 1 columns, the white part on the leading axes.
    x = torch.from_numpy(gpt2_wpe)
    few = gp_factors(x, 3)
    many = gp_factors(x, 27)
    assert few is not None and many is not None
    assert few.width < 80 and few.white_rank < many.white_rank < 561 and many.width < 561


def _smooth_table(n: int = 256, d: int = 128, seed: int = 3) -> torch.Tensor:
    # smooth stationary curves (length scale 15) with 1% white noise, most variance in a few directions
    rng = np.random.default_rng(seed)
    smooth = gaussian_filter1d(rng.standard_normal((n, d)), 15, axis=0, mode="wrap") * np.geomspace(
        1.0, 0.05, d
    )
    return torch.from_numpy(smooth / smooth.std() + 0.01 * rng.standard_normal((n, d)) + 0.3)


def test_stationary_tables_have_the_rows_inner_products_of_the_whole_surrogates():
    # With a tail spectrum the leading axes get the kept modes plus a stationary draw through the other
    # bins: the narrow table must have the rows' inner products of the whole surrogate from the same draws.
    n, big_r, r = 64, 30, 4
    f = _factors(n=n, big_r=big_r, r=r)
    tail = torch.linspace(1.0, 0.0, n + 1, dtype=torch.float64) ** 2 * 0.01
    f = ModeFactors(f.modes, f.scales, f.mean_in, f.mean_out, white=0.0, white_rank=r, tail=tail)
    like = torch.empty(0, dtype=torch.float64)
    fast = f.tables(3, torch.Generator().manual_seed(5), like)
    gen = torch.Generator().manual_seed(5)
    weights = randn((3, big_r, f.modes.shape[1]), gen, like).mT * f.scales
    whole = torch.zeros(3, n, big_r + 1, dtype=torch.float64)
    whole[..., :big_r] = f.modes @ weights + f.mean_in
    whole[..., :r] += fourier_draws(tail, n, 2 * n, (3, r), gen).mT * f.scales[:r]
    whole[..., big_r] = f.mean_out
    torch.testing.assert_close(fast @ fast.mT, whole @ whole.mT, rtol=1e-10, atol=1e-10)


def test_stationary_factors_split_the_kernel_exactly_and_leave_out_within_the_bound():
    # The kept modes and the tail add up to the table's own stationary kernel (Wood & Chan's circulant, at
    # every offset the table has); what the narrow surrogates leave out (the tail on the axes after the
    # first r) is at most 0.1% of their variance; and they are narrower than the plain fast null's axes.
    x = _smooth_table()
    f = stationary_factors(x, 3)
    assert f is not None and f.tail is not None
    dec = _decomposition(x)
    n = x.shape[0]
    # toeplitz_kernel takes the circulant's eigenvalues: M/2 = n times a weight's variance inside the band,
    # M = 2n times it at bins 0 and n (mode_variances, inverted)
    lam_tail = f.tail * n
    lam_tail[0] *= 2
    lam_tail[-1] *= 2
    kernel = toeplitz_kernel(_spectrum(dec), n)
    torch.testing.assert_close(f.modes @ f.modes.T + toeplitz_kernel(lam_tail, n), kernel, rtol=0, atol=1e-10)
    assert float(kernel[0, 0]) == pytest.approx(1.0)  # so the tail's variance is its share of the kernel's
    lam = _likelihood_axes(dec, "stationary")[0]
    left_out = float(f.tail.sum()) * float(lam[f.white_rank :].sum() / lam.sum())
    assert 0 < left_out <= 1 - FAST_VARIANCE + 1e-12
    assert f.width < lam.shape[0] + 1


def test_white_noise_has_no_stationary_factors():
    # A flat spectrum has no few bins that carry the kernel: the plain fast null is the narrowest.
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((256, 48)))
    assert stationary_factors(x, 3) is None


def test_gpt2_stationary_surrogates_are_narrow(gpt2_wpe):
    # 479 of GPT-2's 768 axes hold 99.9% of the stationary null's variance; with the spectrum's leading
    # bins as shared modes its surrogates need little more than half the columns (271).
    x = torch.from_numpy(gpt2_wpe)
    f = stationary_factors(x, 3)
    plain = null_basis(x, "fast", "stationary", min_rank=3)
    assert f is not None and f.width < 0.6 * plain.rank and f.white_rank < plain.rank
