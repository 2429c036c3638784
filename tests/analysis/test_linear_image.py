"""The linear-image rule: a noisy image of a sinusoidal table is one whatever its storage dtype, with its noise
level; smooth low-rank curves (GP, polynomials, walks) and images with a drift are not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.analysis._linear_image import DAMPING, MIN_PLANES
from pos_geometry.analysis.identify import LINEAR_IMAGE, identify


def _image(n: int, d: int, noise: float, rng: np.random.Generator, *, rotary: bool = False) -> np.ndarray:
    """A sinusoidal (or rotary, cos first) table of base 1e4 under a dense map of condition 10, plus white noise
    of ``noise`` times its largest entry."""
    table = pg.sinusoidal(n, d).matrix.double().numpy()  # interleaved (sin pθ_i, cos pθ_i)
    if rotary:  # RoPE's (cos pθ_i, sin pθ_i) pairs
        table = table.reshape(n, d // 2, 2)[:, :, ::-1].reshape(n, d)
    q1, q2 = (np.linalg.qr(rng.standard_normal((d, d)))[0] for _ in range(2))
    x = table @ (q1 @ np.diag(np.geomspace(1, 10, d)) @ q2)
    return x + noise * np.abs(x).max() * rng.standard_normal(x.shape)


def _gp(n: int, d: int, ell: float, rng: np.random.Generator) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    w, v = np.linalg.eigh(np.exp(-((t[:, None] - t[None, :]) ** 2) / (2 * ell**2)))
    return (v * np.sqrt(np.clip(w, 0, None))) @ rng.standard_normal((n, d))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
@pytest.mark.parametrize(("n", "d", "rotary"), [(1024, 128, False), (1024, 64, True)])
def test_a_noisy_image_is_one_in_every_dtype_with_its_noise_level(dtype, n, d, rotary):
    # the case: 1e-6 relative noise made every float64/float32 image "unknown" (the rank was cut at the
    # dtype's precision) while float16 passed. The base comes back, and the noise level is the added noise's
    # share of the norm (or the storage precision's rounding, whichever is larger)
    rng = np.random.default_rng(3)
    x = _image(n, d, 1e-6, rng, rotary=rotary)
    truth = float(np.linalg.norm(x - _image(n, d, 0.0, np.random.default_rng(3), rotary=rotary))) / float(
        np.linalg.norm(x)
    )
    ident = identify(torch.from_numpy(x).to(dtype))
    assert ident.kind == LINEAR_IMAGE, ident.reason
    assert ident.base == pytest.approx(1e4, rel=1e-3)
    rounding = float(torch.finfo(dtype).eps) / np.sqrt(3)
    assert max(truth, rounding) / 2 < ident.noise_level < 2.5 * max(truth, rounding)
    assert f"noise {ident.noise_level:.2g} of the table's norm" in ident.reason
    assert "noise level" in ident.summary()


@pytest.mark.parametrize("noise", [1e-4, 1e-2])
def test_a_much_noisier_image_is_still_one(noise):
    rng = np.random.default_rng(4)
    ident = identify(torch.from_numpy(_image(1024, 64, noise, rng)).float())
    assert ident.kind == LINEAR_IMAGE and ident.base == pytest.approx(1e4, rel=1e-2), ident.reason
    # noise of `noise` times the largest entry in every entry: a fraction of the norm a few times that
    assert noise < ident.noise_level < 10 * noise


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
@pytest.mark.parametrize("ell", [100.0, 250.0])
def test_smooth_gaussian_process_curves_are_not_images(dtype, ell):
    # GP curves in float32 were "linear images" in 89 of 90 tables: their shift map is near the circle but the
    # planes it resolves decay or grow by e² to e⁹⁰ over the window, and never four of them turn on a lattice
    rng = np.random.default_rng(5)
    for _ in range(5):
        ident = identify(torch.from_numpy(_gp(1024, 64, ell, rng)).to(dtype))
        assert ident.kind == "unknown", ident.reason
        assert "not a linear image of one" in ident.reason


def test_polynomials_are_not_images():
    # polynomials of degree 3-8 were images in 7 of 10, with "planes" turning 0 to 0.24 times
    rng = np.random.default_rng(6)
    for degree in range(3, 9):
        u = np.linspace(-1, 1, 1024)[:, None] ** np.arange(degree + 1)[None]
        ident = identify(torch.from_numpy(u @ rng.standard_normal((degree + 1, 64))).float())
        assert ident.kind == "unknown" and "0 undamped plane(s) turn" in ident.reason, ident.reason


def test_walks_are_not_images_and_the_reason_names_the_rule():
    rng = np.random.default_rng(7)
    for _ in range(5):
        ident = identify(torch.from_numpy(rng.standard_normal((1024, 64)).cumsum(0)))
        assert ident.kind == "unknown" and "not a linear image" in ident.reason


def test_each_rule_decides_on_its_own():
    from pos_geometry.analysis._linear_image import linear_image

    rng = np.random.default_rng(8)
    positions = np.arange(512, dtype=np.float64)
    # an image of 3 planes only: fewer than MIN_PLANES, however exact
    three = pg.sinusoidal(512, 6, base=50.0).matrix.double().numpy() @ rng.normal(size=(6, 6))
    fit = linear_image(three / np.abs(three).max(), positions, 1e-16)
    assert not fit.is_image and f"at least {MIN_PLANES}" in fit.why_not and fit.resolved == 3
    # planes that turn undamped but whose frequencies are on no lattice (4, 11, 19, 31 turns... irregular)
    t = positions[:, None]
    freqs = 2 * np.pi * np.array([40.0, 23.0, 17.0, 9.0]) / 512
    s = np.concatenate([np.sin(t * freqs), np.cos(t * freqs)], axis=1)
    off = s @ rng.normal(size=(8, 8))
    fit = linear_image(off / np.abs(off).max(), positions, 1e-16)
    assert not fit.is_image and "no base lattice" in fit.why_not and fit.resolved == 4
    # the same planes on a lattice (ratio 0.7) are an image
    freqs = 0.7 ** np.arange(4)  # θ_i = base^(-2i/8) with base 0.7^-4: 1 .. 0.34 rad/position
    on = np.concatenate([np.sin(t * freqs), np.cos(t * freqs)], axis=1) @ rng.normal(size=(8, 8))
    fit = linear_image(on / np.abs(on).max(), positions, 1e-16)
    assert fit.is_image and fit.base == pytest.approx(0.7 ** (-4), rel=1e-6)
    # a decaying plane is not undamped: amplitude e^(-2) over the window
    damped = on * np.exp(-(DAMPING + 1) * positions / 512)[:, None]
    fit = linear_image(damped / np.abs(damped).max(), positions, 1e-16)
    assert not fit.is_image and fit.resolved == 0


def test_a_wide_image_is_tested_on_its_signal_rank_not_its_width():
    # 512 positions of a 384-wide image: fewer than 2·d + 2, once "not tested". Its slow planes are nearly low
    # polynomials, so few directions rise above the noise, and 2r + 2 positions are enough for the shift test
    n, d = 512, 384
    assert n < 2 * d + 2
    ident = identify(torch.from_numpy(_image(n, d, 1e-6, np.random.default_rng(3))).float())
    assert ident.kind == LINEAR_IMAGE, ident.reason
    assert ident.base == pytest.approx(1e4, rel=1e-3)


@pytest.mark.parametrize(("rank", "tested"), [(100, True), (127, True), (128, False), (200, False)])
def test_the_shift_test_needs_two_positions_per_direction_and_says_so(rank, tested):
    from pos_geometry.analysis._linear_image import linear_image

    # 256 positions: a signal of rank r is tested exactly when 256 ≥ 2r + 2
    rng = np.random.default_rng(9)
    y = rng.normal(size=(256, rank)) @ rng.normal(size=(rank, 768)) + 1e-9 * rng.normal(size=(256, 768))
    fit = linear_image(y / np.abs(y).max(), np.arange(256.0), 1e-16)
    assert fit.rank == rank and fit.tested == tested and not fit.is_image
    ident = identify(torch.from_numpy(y))
    assert ident.kind == "unknown"
    if tested:
        assert "not a linear image of one" in ident.reason
    else:
        assert f"not tested: the shift test of its {rank} directions above the noise needs at least 2·{rank} + 2 = " \
               f"{2 * rank + 2} positions, the window has 256" in ident.reason  # fmt: skip


def test_the_lattice_is_read_where_its_planes_are_a_bin_apart():
    from pos_geometry.analysis._linear_image import lattice_planes

    # Vaswani's lattice over 1024 positions: 64 columns crowd exactly where planes stop turning four times
    # (θ·(1 − q) = 2π/1024 at θ = 8π/1024), 768 columns already below θ = 2π / (1024·(1 − q)) ≈ 0.26
    for d in (64, 768):
        theta = 1e4 ** (-2 * np.arange(d // 2) / d)
        q = 1e4 ** (-2 / d)
        keep = lattice_planes(theta[theta * 1024 >= 8 * np.pi], 1024.0)
        expected = theta[theta * 1024 >= 8 * np.pi] * (1 - q) >= 2 * np.pi / 1024
        np.testing.assert_array_equal(keep, expected)
        assert keep.all() if d == 64 else keep.sum() < keep.size // 2


@pytest.mark.slow
@pytest.mark.parametrize("noise", [1e-6, 1e-2])
def test_a_768_wide_image_over_1024_positions_is_one(noise):
    # its 384 planes crowd within a bin below 0.26 rad/position; the shift map gives blends there, a bin apart but
    # off the lattice by up to half its step (2.4%), so the lattice is read above that
    x = _image(1024, 768, noise, np.random.default_rng(1))
    ident = identify(torch.from_numpy(x).float())
    assert ident.kind == LINEAR_IMAGE, ident.reason
    assert ident.base == pytest.approx(1e4, rel=1e-2 if noise > 1e-4 else 1e-4)
    assert "the lattice read on the " in ident.reason


def test_a_table_whose_noise_makes_the_rebuild_vacuous_is_not_an_image():
    from pos_geometry.analysis._linear_image import MAX_BOUND, REBUILD, linear_image

    # AR(1) columns as wide as their positions are many: their position covariance is Toeplitz, so their leading
    # directions are sinusoids, a few of them on some lattice by chance; their noise is 0.7 of the norm, and any
    # rebuild is within 3× that. Eleven of 200 such tables were "images"
    rng = np.random.default_rng(0)
    reasons = []
    for _ in range(8):
        eps = rng.standard_normal((456, 768))
        t = np.empty_like(eps)
        t[0] = eps[0]
        for k in range(1, 456):
            t[k] = 0.5 * t[k - 1] + eps[k]
        x = t[200:].astype(np.float32).astype(np.float64)
        fit = linear_image(x / np.abs(x).max(), np.arange(256.0), float(np.finfo(np.float32).eps))
        assert not fit.is_image and REBUILD * fit.noise >= MAX_BOUND
        reasons.append(fit.why_not)
    assert sum("too large for the rebuild" in r for r in reasons) >= 1, reasons
    # a noisy image far below the bound is one (noise 1e-2 of its largest entry: about 5% of its norm)
    fit = linear_image(
        *(lambda x: (x / np.abs(x).max(),))(_image(1024, 64, 1e-2, rng)), np.arange(1024.0), 1e-7
    )
    assert fit.is_image and REBUILD * fit.noise < MAX_BOUND
