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
