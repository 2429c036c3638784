"""The sinusoidal table against the paper's formula, its exact periodicity, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pos_geometry.encodings import sinusoidal, sinusoidal_table
from pos_geometry.errors import InvalidArgumentError


def _paper_formula(n: int, d: int, base: float) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)), written out with math."""
    out = np.zeros((n, d))
    for pos in range(n):
        for i in range(d // 2):
            angle = pos / base ** (2 * i / d)
            out[pos, 2 * i] = math.sin(angle)
            out[pos, 2 * i + 1] = math.cos(angle)
    return out


@pytest.mark.parametrize(("n", "d", "base"), [(50, 16, 10000.0), (37, 6, 100.0), (1, 2, 2.0)])
def test_matches_the_paper_formula(n, d, base):
    table = sinusoidal_table(n, d, base=base, dtype=torch.float64)
    np.testing.assert_allclose(table.numpy(), _paper_formula(n, d, base), rtol=0, atol=1e-12)


def test_known_values():
    pe = sinusoidal(1024, 768)
    m = pe.matrix.double()
    assert torch.equal(pe.matrix[0], torch.tensor([0.0, 1.0] * 384))
    p = torch.arange(1024, dtype=torch.float64)
    torch.testing.assert_close(m[:, 0], torch.sin(p), rtol=0, atol=1e-6)  # i = 0: wavelength 2π
    torch.testing.assert_close(m[:, 1], torch.cos(p), rtol=0, atol=1e-6)
    assert m[1, 766].item() == pytest.approx(math.sin(1 / 10000 ** (766 / 768)), abs=1e-7)


def test_each_column_pair_is_periodic_with_period_2pi_base_pow_2i_over_d():
    n, d, base = 300, 64, 10000.0
    m = sinusoidal_table(n, d, base=base, dtype=torch.float64)
    z = torch.complex(m[:, 1::2], m[:, 0::2])  # cos + i·sin: a point on the unit circle per pair
    torch.testing.assert_close(z.abs(), torch.ones_like(z.abs()), rtol=0, atol=1e-12)
    step = torch.angle(z[1:] / z[:-1])  # the rotation from one position to the next, (n-1, d/2)
    period = 2 * math.pi * base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    expected = torch.remainder(2 * math.pi / period + math.pi, 2 * math.pi) - math.pi
    torch.testing.assert_close(step, expected.expand_as(step), rtol=0, atol=1e-10)
    # shifting by the period returns each pair to the same point, at any real position
    t = torch.linspace(0, 50, 101, dtype=torch.float64)
    for i in (0, 5, 31):
        w = base ** (-2 * i / d)
        torch.testing.assert_close(torch.sin((t + float(period[i])) * w), torch.sin(t * w), rtol=0, atol=1e-9)


def test_provenance_dtype_and_device():
    pe = sinusoidal(10, 4, base=500.0, dtype=torch.float64, device="cpu")
    assert pe.kind == "sinusoidal" and pe.provenance.model_id == "sinusoidal"
    assert pe.provenance.config_dict == {
        "n_positions": 10,
        "d_model": 4,
        "base": 500.0,
        "layout": "interleaved",
    }
    assert pe.dtype == torch.float64 and pe.device.type == "cpu" and pe.shape == (10, 4)
    assert sinusoidal(10, 4, dtype=torch.bfloat16).dtype == torch.bfloat16


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((10, 7), {}, "d_model must be even"),
        ((0, 8), {}, "n_positions must be a positive int"),
        ((10, -2), {}, "d_model must be a positive int"),
        ((10.0, 8), {}, "n_positions must be a positive int"),
        ((10, 8), {"base": 1.0}, "base must be a finite number > 1"),
        ((10, 8), {"base": float("inf")}, "base must be a finite number > 1"),
    ],
)
def test_bad_input(args, kwargs, message):
    with pytest.raises(InvalidArgumentError, match=message):
        sinusoidal(*args, **kwargs)


def _whisper_formula(length: int, channels: int, max_timescale: float = 10000.0) -> np.ndarray:
    """Whisper's encoder table, written out with math from its published rule (whisper/model.py `sinusoids`):
    log_timescale_increment = ln(max_timescale) / (channels // 2 - 1);
    inv_timescales = exp(-increment * i); table = [sin(t * inv) | cos(t * inv)]."""
    half = channels // 2
    increment = math.log(max_timescale) / (half - 1)
    out = np.zeros((length, channels))
    for t in range(length):
        for i in range(half):
            angle = t * math.exp(-increment * i)
            out[t, i] = math.sin(angle)
            out[t, half + i] = math.cos(angle)
    return out


@pytest.mark.parametrize(("n", "d", "base"), [(1500, 384, 10000.0), (40, 8, 100.0)])
def test_blocks_layout_matches_whispers_formula(n, d, base):
    table = sinusoidal_table(n, d, base=base, layout="blocks", dtype=torch.float64)
    np.testing.assert_allclose(table.numpy(), _whisper_formula(n, d, base), rtol=0, atol=1e-9)


def test_the_two_layouts_differ_in_frequency_by_up_to_base_to_the_1_over_half_minus_1():
    from pos_geometry.encodings.sinusoidal import frequencies

    inter = frequencies(384, layout="interleaved").numpy()
    blocks = frequencies(384, layout="blocks").numpy()
    assert inter[0] == blocks[0] == 1.0 and blocks[-1] == pytest.approx(1e-4, rel=1e-12)
    # w_i(blocks) / w_i(2017) = base^(2i/d - i/(d/2 - 1)) <= 1, smallest at the last i = d/2 - 1
    rel = np.abs(inter - blocks) / inter
    assert int(rel.argmax()) == 191
    assert float(rel.max()) == pytest.approx(1 - 10000.0 ** (-2 / 384), rel=1e-9)
    assert 0.046 < float(rel.max()) < 0.048  # "differ by up to 4.7%"
    pe = sinusoidal(1500, 384, layout="blocks")
    assert pe.provenance.config_dict["layout"] == "blocks" and "Whisper" in pe.provenance.source
    with pytest.raises(InvalidArgumentError, match="layout"):
        sinusoidal_table(10, 8, layout="whisper")
