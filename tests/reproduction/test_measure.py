"""model_figures / parse_window_text: the numbers behind `pos-geometry plot` and `analyze`."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA

from pos_geometry import InvalidArgumentError, PositionalEmbedding, Provenance, fit_helix
from pos_geometry.cli._common import parse_window_text
from pos_geometry.reproduction.measure import model_figures


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("1:1024", (1, 1024)),
        ("100:", (100, None)),
        (":99", (None, 99)),
        (" 3 : 7 ", (3, 7)),
    ],
)
def test_parse_window_text(text, expected):
    assert parse_window_text(text) == expected


@pytest.mark.parametrize("text", ["5", "1:2:3", "a:b", "1.5:3"])
def test_parse_window_text_rejects(text):
    with pytest.raises(InvalidArgumentError, match="window"):
        parse_window_text(text)


def test_figures_of_the_real_table_match_sklearn(gpt2_wpe):
    pe = PositionalEmbedding(gpt2_wpe, Provenance("gpt2", "learned", "test"))
    figs = model_figures(pe, window=(100, 1024))
    oracle = np.cumsum(PCA(10).fit(gpt2_wpe[100:].astype(np.float64)).explained_variance_ratio_)
    assert figs.top1 == pytest.approx(oracle[0], abs=1e-5)
    assert figs.top3 == pytest.approx(oracle[2], abs=1e-5)
    assert figs.top3 == pytest.approx(0.9511, abs=1e-3)  # the reference figure for rows 100..1023
    assert figs.top10 == pytest.approx(oracle[9], abs=1e-5)
    centred = gpt2_wpe[100:].astype(np.float64) - gpt2_wpe[100:].mean(0)
    s = np.linalg.svd(centred, compute_uv=False)
    assert figs.stable_rank == pytest.approx((s**2).sum() / s[0] ** 2, rel=1e-5)
    assert figs.helix is not None and figs.helix.shape == "helix"
    row = figs.row()
    assert row["window"] == "100:1024" and row["n_positions"] == 1024 and row["kind"] == "learned"
    assert row["processing"] == ["rows[100:1024]", "center_positions"]
    line = figs.line()
    assert "1024×768 learned, rows 100–1023" in line and f"{100 * oracle[2]:.2f}%" in line


def test_helix_is_the_same_fit_as_the_public_api():
    t = np.arange(300.0)
    z = np.stack([np.cos(2 * np.pi * t / 75), np.sin(2 * np.pi * t / 75), t / 300], axis=1)
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(16, 3)))
    table = z @ q.T + 0.001 * np.random.default_rng(1).normal(size=(300, 16))
    figs = model_figures(PositionalEmbedding(table, Provenance("toy", "learned", "test")))
    direct = fit_helix(table)
    assert figs.helix.periods[0] == pytest.approx(direct.periods[0], rel=1e-6)
    assert figs.helix.periods[0] == pytest.approx(75, rel=0.01)


def test_long_tables_are_not_helix_fitted_and_say_why():
    pe = PositionalEmbedding(np.random.default_rng(0).normal(size=(64, 4)), Provenance("toy", "learned", "t"))
    figs = model_figures(pe, helix_max_positions=32)
    assert figs.helix is None and "64 positions > 32" in figs.helix_note
    assert figs.top10 is None and figs.top3 is not None  # only 4 components exist
    assert "helix not fitted" in figs.line()
    assert figs.row()["helix_period"] is None
