"""The fast smooth-GP surrogates (``analysis/_gp_surrogates.py``) are the surrogates, up to an isometry."""

from __future__ import annotations

import numpy as np
import torch

from pos_geometry.analysis._draws import randn
from pos_geometry.analysis._gp_surrogates import GPFactors, gp_factors


def _factors(n: int = 96, big_r: int = 40, r: int = 5) -> GPFactors:
    rng = np.random.default_rng(0)
    t = np.arange(n)[:, None] * np.arange(1, 5)[None, :] * 2 * np.pi / n
    modes = torch.from_numpy(np.concatenate([np.cos(t), np.sin(t)], axis=1) * 0.3)  # (n, 2K = 8)
    return GPFactors(
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
    weights = randn((3, k2, big_r), gen, like) * f.scales
    whole = torch.zeros(3, n, big_r + 1, dtype=torch.float64)
    whole[..., :big_r] = f.modes @ weights + f.mean_in
    whole[..., :r] += f.white * randn((3, n, r), gen, like) * f.scales[:r]
    whole[..., big_r] = f.mean_out
    assert fast.shape == (3, n, k2 + r + 1)
    torch.testing.assert_close(fast @ fast.mT, whole @ whole.mT, rtol=1e-10, atol=1e-10)


def test_gpt2_surrogates_are_narrow_and_leave_out_little(gpt2_wpe):
    # GPT-2's null covariance needs 561 of 768 axes for 99.9% of its variance; the smooth part of all of
    # them fits in 2K + 1 columns, the white part on the leading axes.
    x = torch.from_numpy(gpt2_wpe)
    few = gp_factors(x, 3)
    many = gp_factors(x, 27)
    assert few is not None and many is not None
    assert few.width < 80 and few.white_rank < many.white_rank < 561 and many.width < 561
