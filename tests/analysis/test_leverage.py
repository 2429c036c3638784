"""A few rows that hold most of a leading component's variance are found, named, and (by default) repaired
before the one PCA of ``analyze``, round after round until none dominates, so that outlier rows cannot flip
the helix verdict; rows that are part of the curve (smooth in position) are named and kept; the analyses
called on their own say when their decomposition is dominated."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry import PositionalEmbedding, Provenance
from pos_geometry.analysis.leverage import dominance_note, repair_rows, row_leverage
from pos_geometry.errors import InvalidArgumentError


def _helix_with_outliers(
    rows, n: int = 1024, d: int = 128, seed: int = 0, *, same: bool = False, period: float = 300, radius=None
) -> PositionalEmbedding:
    """A helix of ``period`` at SNR about 1 in ``d`` dimensions (its radius ``radius(t)``, default 1); ``rows``
    replaced by random directions (one direction for all with ``same``) of 30x the median row norm."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)[:, None]
    r = np.ones((n, 1)) if radius is None else radius(t)
    basis = np.linalg.qr(rng.normal(size=(d, 3)))[0]
    curve = [r * np.cos(2 * np.pi * t / period), r * np.sin(2 * np.pi * t / period), t / n]
    x = np.concatenate(curve, axis=1) @ basis.T
    x = x * np.sqrt(d) + rng.normal(size=(n, d))
    median = np.median(np.linalg.norm(x, axis=1))
    v = rng.normal(size=d)
    for row in rows:
        v = v if same else rng.normal(size=d)
        x[row] = v / np.linalg.norm(v) * 30 * median
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


def test_repair_interpolates_between_the_nearest_ordinary_rows_in_the_window():
    m = torch.arange(10, dtype=torch.float64)[:, None].repeat(1, 2) ** 2
    fixed = repair_rows(m, [0, 4, 5, 9])
    # 4 and 5 on the line from row 3 (9) to row 6 (36); the ends copy their nearest ordinary row
    assert fixed[:, 0].tolist() == [1, 1, 4, 9, 18, 27, 36, 49, 64, 64]
    assert torch.equal(m[:, 0], torch.arange(10, dtype=torch.float64) ** 2)  # a copy: the input is untouched
    # a window that starts at 2 never reads rows 0 and 1, and leaves them as they are
    windowed = repair_rows(m, [0, 2, 3], window=(2, 10))
    assert windowed[:, 0].tolist()[:5] == [0, 1, 16, 16, 16]


@pytest.fixture(scope="module")
def clean_helix():
    return pg.analyze(_helix_with_outliers(()), analyses=("helix",), n_surrogates=99)


@pytest.mark.parametrize(
    ("rows", "same"),
    [
        ((163,), False),
        ((194, 330, 461, 828), False),
        ((100, 500, 900), True),  # equal spikes: one direction, several rows
        (tuple(range(400, 408)), False),  # a burst: each row's neighbours are outliers too
        ((23, 479, 527, 683, 821, 825), False),  # six random spikes, two of them 4 rows apart
    ],
)
def test_the_helix_verdict_does_not_flip_and_the_repair_finishes(rows, same, clean_helix):
    table = _helix_with_outliers(rows, same=same)
    clean = clean_helix
    repaired = pg.analyze(table, analyses=("helix",), n_surrogates=99)
    assert clean.helix.verdict == repaired.helix.verdict == "helix"
    replaced = sorted(
        int(r) for step in repaired.provenance.processing if step.startswith("rows [") for r in
        step[len("rows ["): step.index("]")].split(", ")
    )  # fmt: skip
    assert replaced == sorted(rows)  # every outlier and nothing else (not the rows between two spikes)
    assert repaired.pca.row_leverage(3).rows == ()  # it finished: no row dominates the decomposition analysed
    assert "no row dominates the leading components now" in repaired.notes["outlier_rows"]
    # the share the note states is the replaced rows' own share in the first decomposition
    first = pg.pca(table, 10).row_leverage(3)
    assert f"held {max(first.shares):.0%} of PC" in repaired.notes["outlier_rows"]
    kept = pg.analyze(table, analyses=("helix",), n_surrogates=99, outlier_rows="keep")
    assert kept.helix.verdict != "helix" and "kept (outlier_rows='keep')" in kept.notes["outlier_rows"]


def test_a_shared_share_is_the_named_rows_own():
    """Two spikes hold about two thirds of PC1 together: the words say what those rows hold, not what the
    top 1% (one row) or the whole group of candidates holds."""
    table = _helix_with_outliers((200, 700), same=False)
    leverage = pg.pca(table, 10).row_leverage(3)
    z = pg.pca(table, 10).coordinates[:, :3].double()
    held = (z[[200, 700]] ** 2).sum(0) / (z**2).sum(0)
    assert leverage.rows == (200, 700)
    assert leverage.shares == pytest.approx(held.tolist(), rel=1e-9)
    worst = int(held.argmax())
    assert f"hold {float(held[worst]):.0%} of PC{worst + 1}'s" in leverage.words()


def test_two_equal_spikes_in_a_short_table_are_a_group():
    """128 rows: the top 1% is one row, which holds under half; two equal spikes are still found together."""
    table = _helix_with_outliers((30, 90), n=128, period=40, same=True)
    leverage = pg.pca(table, 10).row_leverage(3)
    assert leverage.rows == leverage.outliers == (30, 90)
    a = pg.analyze(table, analyses=("helix",), n_surrogates=99)
    assert a.pca.row_leverage(3).rows == () and "position(s) [30, 90]" in a.notes["outlier_rows"]


def test_a_flare_that_is_part_of_the_curve_is_named_and_kept():
    """A helix whose radius grows 30-fold towards both ends, smoothly: the end rows dominate PC1, but no jump
    sets them apart, so they are named as part of the curve and nothing is replaced."""
    flare = lambda t: 1 + 30 * np.exp(-t / 4) + 30 * np.exp(-(1023 - t) / 4)  # noqa: E731
    table = _helix_with_outliers((), radius=flare)
    leverage = pg.pca(table, 10).row_leverage(3)
    assert leverage.dominated and leverage.outliers == () and leverage.smooth == leverage.rows
    assert set(leverage.rows) <= {0, 1, 2, 1021, 1022, 1023}
    a = pg.analyze(table, analyses=("helix",), n_surrogates=99)
    assert not any(step.startswith("rows [") for step in a.provenance.processing)
    assert "part of the curve, not outliers" in a.notes["outlier_rows"] and a.notes["outlier_rows"].endswith(
        "kept"
    )
    # the same flare with one spike in the middle: the spike goes, the flare stays
    spiked = PositionalEmbedding(table.matrix.clone(), table.provenance)
    spiked.matrix[512] = (
        table.matrix.norm(dim=1).median()
        * 30
        * torch.nn.functional.normalize(
            torch.randn(128, generator=torch.Generator().manual_seed(1), dtype=torch.float64), dim=0
        )
    )
    b = pg.analyze(spiked, analyses=(), n_surrogates=99)
    assert "position(s) [512]" in b.notes["outlier_rows"] and "part of the curve" in b.notes["outlier_rows"]


def test_a_window_is_repaired_from_its_own_rows():
    """Row 0 is outside the window (1, n): row 1, an outlier, is refilled from row 2, never from row 0."""
    table = _helix_with_outliers((0, 1))
    a = pg.analyze(table, window=(1, 1024), analyses=(), n_surrogates=99)
    assert "position(s) [1]" in a.notes["outlier_rows"]
    steps = [s for s in a.provenance.processing if s.startswith("rows [")]
    assert steps == [steps[0]] and steps[0].startswith("rows [1] ")


@pytest.mark.parametrize("analysis", ["fit_helix", "periodicity", "fit_recurrence"])
def test_an_analysis_called_alone_says_its_rows_dominate(analysis):
    table = _helix_with_outliers((194, 330, 461, 828))
    kwargs = {"fit_recurrence": {}}.get(analysis, {"n_surrogates": 99})
    result = getattr(pg, analysis)(table.matrix, **kwargs)
    assert "positions 194, 330, 461, 828" in result.outlier_rows
    assert "pg.analyze replaces" in result.outlier_rows
    assert ("outlier rows", result.outlier_rows) in result.summary_rows()
    if analysis != "periodicity":
        assert result.outlier_rows in result.reason
    clean = getattr(pg, analysis)(_helix_with_outliers(()).matrix, **kwargs)
    assert clean.outlier_rows == "" and "outlier rows" not in dict(clean.summary_rows())


@pytest.mark.parametrize("family", ["walk", "gp", "ar1", "white", "polynomial", "float16 gp"])
def test_null_tables_have_no_dominant_rows(family):
    """Tables with no outlier (Gaussian-step walks, smooth GP curves, AR(1), white noise, polynomials,
    smooth curves stored in float16): no row dominates and nothing is repaired, over 20 draws each."""
    rng = np.random.default_rng(3)
    n, d = 512, 64
    t = np.arange(n, dtype=np.float64)
    k = np.exp(-((t[:, None] - t[None, :]) ** 2) / (2 * 60.0**2))
    w, v = np.linalg.eigh(k)
    gp = v * np.sqrt(np.clip(w, 0, None))
    for _ in range(20):
        if family == "walk":
            x = rng.normal(size=(n, d)).cumsum(0)
        elif family.endswith("gp"):
            x = gp @ rng.normal(size=(n, d))
        elif family == "ar1":
            x = np.zeros((n, d))
            for i in range(1, n):
                x[i] = 0.99 * x[i - 1] + rng.normal(size=d)
        elif family == "white":
            x = rng.normal(size=(n, d))
        else:
            u = np.linspace(-1, 1, n)[:, None] ** np.arange(9)[None]
            x = u @ rng.normal(size=(9, d))
        if family.startswith("float16"):
            x = x.astype(np.float16).astype(np.float64)
        res = pg.pca(torch.from_numpy(x), 10)
        assert res.row_leverage(3).rows == (), family
        assert dominance_note(res.coordinates, res.positions) == ""


def test_outlier_rows_takes_two_values():
    with pytest.raises(InvalidArgumentError, match="outlier_rows must be 'repair' or 'keep'"):
        pg.analyze(_helix_with_outliers(()), analyses=(), outlier_rows="drop")


def test_a_batch_fit_is_indexed_first():
    batch = pg.pca(torch.randn(2, 64, 8, generator=torch.Generator().manual_seed(0)), 3)
    with pytest.raises(InvalidArgumentError, match="index the batch first"):
        batch.row_leverage()
    assert batch[0].row_leverage().rows == ()
