"""identify: sinusoidal (layout, base), rotary, learned or unknown, from the table alone."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.analysis.identify import TOLERANCE, identify
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.encodings.sinusoidal import frequencies


@pytest.mark.parametrize(
    ("n", "d", "layout", "base"),
    [(1024, 128, "interleaved", 10000.0), (1500, 384, "blocks", 10000.0), (300, 64, "interleaved", 500.0),
     (200, 16, "blocks", 1e6), (512, 768, "interleaved", 10000.0)],
)  # fmt: skip
def test_formulas_give_their_layout_base_and_frequencies(n, d, layout, base):
    table = pg.sinusoidal(n, d, layout=layout, base=base, dtype=torch.float64)
    ident = identify(table)
    assert (ident.kind, ident.layout, ident.order) == ("sinusoidal", layout, "sin-cos")
    assert ident.base == pytest.approx(base, rel=1e-9) and ident.amplitude == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(ident.frequencies, frequencies(d, base=base, layout=layout).numpy(), rtol=1e-9)
    assert ident.residual < 1e-9 and ident.formula_residual < 1e-9 and ident.is_formula


@pytest.mark.parametrize(("dtype", "bound"), [(torch.float16, 1e-3), (torch.bfloat16, 5e-3)])
def test_a_rounded_copy_is_still_the_formula(dtype, bound):
    # a float16 (bfloat16) copy of Whisper's encoder table: entries off by up to 5e-4 (4e-3)
    rounded = pg.sinusoidal(1500, 384, layout="blocks").matrix.to(dtype)
    ident = identify(rounded)
    assert (ident.kind, ident.layout) == ("sinusoidal", "blocks")
    assert ident.base == pytest.approx(10000.0, rel=1e-3) and ident.residual < bound
    np.testing.assert_allclose(ident.frequencies, frequencies(384, layout="blocks").numpy(), rtol=1e-3)


def test_a_rotary_table_is_rotary_with_its_base():
    rope = pg.load("pythia-70m")  # [cos pθ_i, sin pθ_i] pairs, θ_i = 10000^(-2i/16)
    ident = identify(rope)
    assert (ident.kind, ident.layout, ident.order) == ("rotary", "interleaved", "cos-sin")
    assert ident.base == pytest.approx(10000.0, rel=1e-6) and ident.residual < 1e-6


def test_scaled_frequencies_are_listed_without_a_base():
    theta = np.array([1.0, 0.4, 0.05, 0.03, 0.002])  # no geometric rule
    ang = np.arange(400)[:, None] * theta
    table = np.stack([np.cos(ang), np.sin(ang)], axis=2).reshape(400, 10)
    ident = identify(table)
    assert ident.kind == "rotary" and ident.base is None and "no single base" in ident.reason
    np.testing.assert_allclose(ident.frequencies, theta, rtol=1e-9)


def test_frequency_errors_cover_the_truth_in_white_noise():
    """Each pair's standard error comes from the scatter of its phase: over 40 noisy rotary tables (noise 0.3%
    of the amplitude, 12 planes each, two within a Fourier bin of each other) the 95% intervals hold the truth
    about 95% of the time, and are not so wide that they always do."""
    theta = np.array([1.0, 0.5, 0.31, 0.2, 0.12, 0.08, 0.05, 0.03, 0.02, 0.0151, 0.015, 0.011])
    ang = np.arange(600)[:, None] * theta
    clean = np.stack([np.cos(ang), np.sin(ang)], axis=2).reshape(600, 24)
    rng = np.random.default_rng(5)
    z = []
    for _ in range(40):
        ident = identify(clean + 3e-3 * rng.normal(size=clean.shape))
        assert ident.kind == "rotary" and ident.frequency_std is not None
        z.append((ident.frequencies - theta) / ident.frequency_std)
    covered = float(np.mean(np.abs(np.concatenate(z)) <= 1.96))
    assert 0.9 <= covered <= 0.98


@pytest.mark.parametrize("noise", [2e-3, 6.5e-3, 7.5e-3, 5e-2])  # residual 0.003, 0.009, 0.011, 0.07
def test_stored_planes_agree_with_identify_at_the_tolerance(noise):
    """``stored_planes`` rejects a table from its pairs' radii before fitting phases: that cheap test never
    refuses a table ``identify`` calls a formula, on either side of the tolerance."""
    from pos_geometry.analysis.identify import stored_planes

    clean = pg.sinusoidal(400, 32, dtype=torch.float64).matrix
    table = clean + noise * torch.from_numpy(np.random.default_rng(2).normal(size=clean.shape))
    ident = identify(table)
    assert (stored_planes(table) is not None) == ident.is_formula
    assert ident.is_formula == (ident.residual <= TOLERANCE)


def test_an_exact_tables_errors_are_its_arithmetic():
    """Exact float64 frequencies are found to their last digits, and their errors are as small (not zero)."""
    ident = identify(pg.sinusoidal(1024, 128, dtype=torch.float64))
    truth = frequencies(128).numpy()
    assert np.all(np.abs(ident.frequencies - truth) <= 1.96 * ident.frequency_std)
    assert np.all(ident.frequency_std > 0) and np.all(ident.frequency_std < 1e-12 * truth)


def test_a_window_reads_absolute_positions():
    ident = identify(pg.sinusoidal(1024, 128), window=(100, 600))
    assert (
        ident.kind == "sinusoidal"
        and ident.base == pytest.approx(1e4, rel=1e-6)
        and ident.window == (100, 600)
    )
    # the same rows read as positions 0..499: no formula (their phases start at 100·θ), but a phase shift is a
    # rotation within each pair, so the table is a linear image of a sinusoidal one, with the same frequencies
    shifted = identify(pg.sinusoidal(1024, 128).matrix[100:600])
    assert shifted.kind == "linear image" and not shifted.is_formula
    truth = 1e4 ** (-2 * np.arange(64) / 128)
    for cycles, rtol in ((8, 1e-6), (4, 1e-3)):  # the slower a plane, the fewer cycles pin it down
        resolved = truth * 500 >= 2 * np.pi * cycles
        np.testing.assert_allclose(shifted.frequencies[: resolved.sum()], truth[resolved], rtol=rtol)


def test_learned_and_random_tables_are_not_formulas(gpt2_wpe):
    gpt2 = PositionalEmbedding(
        torch.as_tensor(gpt2_wpe), Provenance(model_id="gpt2", kind="learned", source="x")
    )
    ident = identify(gpt2)
    assert ident.kind == "learned" and ident.residual > 0.5 and not ident.is_formula and ident.base is None
    for half in (torch.float16, torch.bfloat16):  # read at its storage precision, still no linear image
        assert identify(torch.as_tensor(gpt2_wpe).to(half)).kind == "unknown"
    noise = identify(np.random.default_rng(0).standard_normal((300, 64)))
    assert noise.kind == "unknown" and noise.residual > TOLERANCE
    assert identify(np.ones((10, 5))).kind == "unknown"  # odd width: no pairs
    batch = identify(
        np.stack([pg.sinusoidal(64, 16).matrix.numpy(), np.random.default_rng(1).standard_normal((64, 16))])
    )
    assert [i.kind for i in batch] == ["sinusoidal", "unknown"]


def test_analyze_fits_no_helix_to_a_sinusoidal_table_loaded_as_learned():
    # Whisper's encoder table read from a checkpoint loads as "learned", and was called a helix of period
    # 1234. It is the [sin | cos] formula, and analyze says so.
    table = pg.sinusoidal(1500, 384, layout="blocks")
    loaded = PositionalEmbedding(
        table.matrix, Provenance(model_id="openai/whisper-tiny", kind="learned", source="x")
    )
    a = pg.analyze(loaded, analyses=("helix",), n_surrogates=0)
    assert a.helix is None and "sinusoidal" in a.notes["helix"] and a.identity.layout == "blocks"
    assert a.row()["identified_kind"] == "sinusoidal" and a.row()["identified_base"] == pytest.approx(1e4)


@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-8), (torch.float16, 1e-3)])
def test_a_linear_image_of_a_sinusoidal_table_is_recognised_with_its_map(dtype, tolerance):
    """x = S·A with S a sinusoidal table and A a random map: no arrangement of x's columns is a formula, but its
    shift structure is; the frequencies, the base and the map's condition number come back."""
    rng = np.random.default_rng(0)
    s = pg.sinusoidal(512, 16, base=100.0).matrix.double()
    a = torch.from_numpy(rng.normal(size=(16, 16)))
    x = s @ a
    ident = identify((x / x.abs().max()).to(dtype))
    assert ident.kind == "linear image" and not ident.is_formula
    truth = 100.0 ** (-2 * np.arange(8) / 16)
    np.testing.assert_allclose(ident.frequencies, truth, rtol=tolerance)
    assert ident.base == pytest.approx(100.0, rel=tolerance)
    assert ident.map_condition == pytest.approx(np.linalg.cond(a.numpy()), rel=0.05)
    assert "linear image" in ident.summary() and "map condition number" in ident.summary()


def test_a_larger_linear_image_gives_the_frequencies_that_complete_four_cycles():
    rng = np.random.default_rng(1)
    x = pg.sinusoidal(1024, 64).matrix.double() @ torch.from_numpy(rng.normal(size=(64, 64)))
    ident = identify(x)
    truth = 1e4 ** (-2 * np.arange(32) / 64)
    resolved = truth * 1024 >= 8 * np.pi
    assert ident.kind == "linear image" and ident.base == pytest.approx(1e4, rel=1e-4)
    np.testing.assert_allclose(ident.frequencies[: resolved.sum()], truth[resolved], rtol=1e-6)


@pytest.mark.parametrize("make", ["walk", "gpt2-like", "noise"])
def test_what_is_no_linear_image_is_not_called_one(make):
    rng = np.random.default_rng(2)
    x = {
        "walk": rng.normal(size=(512, 16)).cumsum(0),
        "noise": rng.normal(size=(512, 16)),
        "gpt2-like": pg.sinusoidal(512, 16, base=100.0).matrix.double().numpy() @ rng.normal(size=(16, 16))
        + np.outer(np.linspace(0, 1, 512) ** 2, rng.normal(size=16)) * 5,  # a drift no rotation makes
    }[make]
    assert identify(torch.from_numpy(x)).kind == "unknown"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_wide_half_precision_linear_image_is_recognised_with_its_base(dtype):
    # Vaswani's 1024 × 128 table times a random map, stored in half precision, was "unknown": upcast to
    # float32, its rounding noise was kept as signal and the shift map's noise eigenvalues left the unit
    # circle. Read at its storage precision it is a linear image; the planes the window resolves (eight
    # turns, a bin from their neighbours) give their frequencies to 1e-3 and the base to 1e-3.
    from pos_geometry.analysis.identify import resolved_planes

    rng = np.random.default_rng(0)
    x = pg.sinusoidal(1024, 128).matrix.double() @ torch.from_numpy(
        rng.normal(size=(128, 128)) / np.sqrt(128)
    )
    ident = identify(x.to(dtype))
    assert ident.kind == "linear image", ident.reason
    assert ident.base == pytest.approx(1e4, rel=1e-3)
    truth = 1e4 ** (-2 * np.arange(64) / 128)
    ok = resolved_planes(ident.frequencies, 1024, float(torch.finfo(dtype).eps))
    assert ok.sum() >= 15
    for f in ident.frequencies[ok]:
        assert np.min(np.abs(truth - f) / truth) < 1e-3
    assert f"; {ok.sum()} planes resolved" in ident.reason


@pytest.mark.slow
def test_whispers_float16_table_under_a_map_gives_its_blocks_base():
    # Whisper's encoder table (1500 × 384, blocks rule θ_i = 10000^(−i/191)) times a random map, in float16:
    # the base read under the interleaved rule is 10000^(192/191); under the blocks rule, 10000.
    rng = np.random.default_rng(0)
    s = pg.sinusoidal(1500, 384, layout="blocks").matrix.double()
    ident = identify((s @ torch.from_numpy(rng.normal(size=(384, 384)) / np.sqrt(384))).half())
    assert ident.kind == "linear image", ident.reason
    assert ident.base ** (382 / 384) == pytest.approx(1e4, rel=1e-3)
    assert "blocks rule" in ident.reason and f"{ident.base ** (382 / 384):.6g}" in ident.reason


@pytest.mark.parametrize("scale", [1e300, 1e160, 1e-170, 1e-300])
def test_the_edges_of_float64_give_the_answers_of_the_unscaled_table(scale):
    """Norms are taken on the table divided exactly by a power of two: no overflow to inf or NaN, no underflow
    to 0 (a table at 1e300 was 'sinusoidal, relative error nan'; a learned-like one at 1e-300 'rotary, 0')."""
    from pos_geometry.analysis._pair_phases import stored_planes

    table = pg.sinusoidal(256, 32).matrix.double()
    ref, got = identify(table), identify(table * scale)
    assert got.kind == ref.kind == "sinusoidal" and got.layout == ref.layout
    assert got.base == pytest.approx(ref.base, rel=1e-9) and got.residual == pytest.approx(
        ref.residual, rel=1e-3
    )
    assert got.amplitude == pytest.approx(ref.amplitude * scale, rel=1e-9)
    np.testing.assert_allclose(stored_planes(table * scale)[0], stored_planes(table)[0], rtol=1e-12)
    t = np.arange(256)[:, None]
    rng = np.random.default_rng(0)
    curve = np.hstack([np.cos(2 * np.pi * t / 100), np.sin(2 * np.pi * t / 100), t / 256.0])
    walk = torch.tensor(curve @ rng.standard_normal((3, 16)) + 0.01 * rng.standard_normal((256, 16)))
    ref, got = identify(walk), identify(walk * scale)
    assert got.kind == ref.kind == "unknown" and math.isfinite(got.residual)
    assert got.residual == pytest.approx(ref.residual, rel=1e-9)


def test_a_zero_table_is_unknown_with_the_reason():
    got = identify(torch.zeros(64, 8, dtype=torch.float64))
    assert got.kind == "unknown" and got.residual == math.inf and "is zero" in got.reason


def test_identify_in_two_steps_gives_the_same_answer_and_decides_formulas_in_the_first():
    from pos_geometry.analysis.identify import identify_in_steps

    formula = pg.sinusoidal(256, 32).matrix
    first = identify_in_steps(formula)
    assert not callable(first) and first.is_formula and first.reason == identify(formula).reason
    rng = np.random.default_rng(3)
    kinds = []
    for table in (
        torch.from_numpy(rng.normal(size=(256, 16)).cumsum(0)),  # not an image
        pg.sinusoidal(512, 16, base=100.0).matrix.double()
        @ torch.from_numpy(rng.normal(size=(16, 16))),  # one
    ):
        step = identify_in_steps(table)
        assert callable(step)
        got, ref = step(), identify(table)
        assert (got.kind, got.reason, got.base) == (ref.kind, ref.reason, ref.base) and not got.is_formula
        kinds.append(got.kind)
    assert kinds == ["unknown", "linear image"]
    with pytest.raises(pg.InvalidArgumentError, match="one table"):
        identify_in_steps(torch.zeros(2, 16, 8))
