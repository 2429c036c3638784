"""A few rows that hold most of a leading component's variance are found, named, and (by default) repaired
before the one PCA of ``analyze``, so that one outlier row cannot flip the helix verdict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry import PositionalEmbedding, Provenance
from pos_geometry.analysis.leverage import repair_rows, row_leverage
from pos_geometry.errors import InvalidArgumentError


def _helix_with_outliers(rows, n: int = 1024, d: int = 128, seed: int = 0) -> PositionalEmbedding:
    """A helix of period 300 at SNR about 1 in ``d`` dimensions; ``rows`` replaced by random directions of 30x
    the median row norm."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)[:, None]
    basis = np.linalg.qr(rng.normal(size=(d, 3)))[0]
    x = np.concatenate([np.cos(2 * np.pi * t / 300), np.sin(2 * np.pi * t / 300), t / n], axis=1) @ basis.T
    x = x * np.sqrt(d) + rng.normal(size=(n, d))
    median = np.median(np.linalg.norm(x, axis=1))
    for r in rows:
        v = rng.normal(size=d)
        x[r] = v / np.linalg.norm(v) * 30 * median
    return PositionalEmbedding(torch.from_numpy(x), Provenance("toy", "learned", "synthetic"))


@pytest.mark.parametrize("rows", [(), (163,), (194, 330, 461, 828)])
def test_the_rows_that_take_the_leading_components_are_named(rows):
    res = pg.pca(_helix_with_outliers(rows), 10)
    leverage = res.row_leverage(3)
    assert leverage.rows == tuple(sorted(rows))
    assert (max(leverage.top_share) > 0.5) == bool(rows)
    if rows:
        assert f"positions {', '.join(map(str, sorted(rows)))}" in leverage.words()


def test_real_tables_and_random_walks_have_no_dominant_rows(gpt2_wpe):
    assert (
        pg.pca(torch.from_numpy(gpt2_wpe), 10).row_leverage(3).rows == ()
    )  # position 0 is odd, not dominant
    walk = np.random.default_rng(0).normal(size=(256, 64)).cumsum(0)
    assert row_leverage(torch.from_numpy(walk - walk.mean(0)), torch.arange(256)).rows == ()


def test_repair_takes_the_nearest_ordinary_neighbours():
    m = torch.arange(10, dtype=torch.float64)[:, None].repeat(1, 2)
    fixed = repair_rows(m, [0, 4, 5, 9])
    assert fixed[:, 0].tolist() == [1, 1, 2, 3, 4.5, 4.5, 6, 7, 8, 8]  # 4 and 5 both from rows 3 and 6
    assert torch.equal(m[:, 0], torch.arange(10, dtype=torch.float64))  # a copy: the input is untouched


@pytest.mark.parametrize("rows", [(163,), (194, 330, 461, 828)])
def test_the_helix_verdict_does_not_flip_for_a_few_rows(rows):
    table = _helix_with_outliers(rows)
    clean = pg.analyze(_helix_with_outliers(()), analyses=("helix",), n_surrogates=99)
    repaired = pg.analyze(table, analyses=("helix",), n_surrogates=99)
    assert clean.helix.verdict == repaired.helix.verdict == "helix"
    assert any(f"rows {list(sorted(rows))} replaced" in step for step in repaired.provenance.processing)
    assert "replaced by their neighbours' mean" in repaired.notes["outlier_rows"]
    kept = pg.analyze(table, analyses=("helix",), n_surrogates=99, outlier_rows="keep")
    assert kept.helix.verdict != "helix" and "kept (outlier_rows='keep')" in kept.notes["outlier_rows"]


def test_outlier_rows_takes_two_values():
    with pytest.raises(InvalidArgumentError, match="outlier_rows must be 'repair' or 'keep'"):
        pg.analyze(_helix_with_outliers(()), analyses=(), outlier_rows="drop")


def test_a_batch_fit_is_indexed_first():
    batch = pg.pca(torch.randn(2, 64, 8, generator=torch.Generator().manual_seed(0)), 3)
    with pytest.raises(InvalidArgumentError, match="index the batch first"):
        batch.row_leverage()
    assert batch[0].row_leverage().rows == ()
