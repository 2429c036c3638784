"""pos_geometry.analysis.pca against scikit-learn's PCA (the oracle) and the blog's GPT-2 figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import DeviceMismatchError, InvalidArgumentError


def helix_like(n: int, d: int, seed: int, noise: float = 0.05, dtype=np.float32) -> np.ndarray:
    """Smooth low-frequency curves in a random basis plus noise: a decaying spectrum with gaps."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)[:, None]
    freqs = np.arange(1, 9)
    amps = 3.0 / freqs
    feats = np.concatenate([amps * np.cos(np.pi * freqs * t), amps * np.sin(np.pi * freqs * t)], axis=1)
    basis = np.linalg.qr(rng.standard_normal((d, feats.shape[1])))[0].T
    return (feats @ basis + noise * rng.standard_normal((n, d)) + rng.standard_normal(d)).astype(dtype)


def sk_fit(x: np.ndarray, k: int, solver: str = "full") -> PCA:
    return PCA(n_components=k, svd_solver=solver).fit(x)


@pytest.mark.parametrize("solver", ["exact", "randomized"])
@pytest.mark.parametrize("shape", [(300, 40), (40, 120), (700, 600)])
def test_matches_sklearn_on_random_matrices(solver, shape):
    x = helix_like(*shape, seed=sum(shape))
    k = 5
    ours = pca(x, k, solver=solver)
    ref = sk_fit(x, k)
    tol = 1e-5 if solver == "exact" else 1e-3
    np.testing.assert_allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, atol=tol)
    np.testing.assert_allclose(
        ours.explained_variance_, ref.explained_variance_, rtol=1e-3 if solver != "exact" else 1e-4
    )
    np.testing.assert_allclose(ours.singular_values_, ref.singular_values_, rtol=1e-3)
    np.testing.assert_allclose(ours.mean_.numpy(), ref.mean_, atol=1e-5)
    # exact sign agreement with sklearn's svd_flip(u_based_decision=False), not just |.|
    np.testing.assert_allclose(
        ours.components_.numpy(), ref.components_, atol=2e-3 if solver != "exact" else 1e-4
    )
    np.testing.assert_allclose(
        ours.coordinates.numpy(), ref.transform(x), atol=2e-2 if solver != "exact" else 1e-3
    )
    assert ours.solver == solver


def test_sign_convention_largest_entry_positive():
    res = pca(helix_like(200, 30, seed=1), 6, solver="exact")
    c = res.components_
    picked = c.gather(-1, c.abs().argmax(-1, keepdim=True))
    assert bool((picked > 0).all())
    gram = c @ c.T
    torch.testing.assert_close(gram, torch.eye(6), atol=1e-5, rtol=0)


@pytest.mark.parametrize("window", [None, (1, 1024), (100, 1024), (1, 100)])
def test_real_gpt2_matches_sklearn(gpt2_wpe, window):
    ours_exact = pca(gpt2_wpe, 10, window=window, solver="exact")
    ours_rand = pca(gpt2_wpe, 10, window=window, solver="randomized")
    a, b = ours_exact.window
    ref = sk_fit(gpt2_wpe[a:b], 10)
    np.testing.assert_allclose(ours_exact.explained_variance_ratio_, ref.explained_variance_ratio_, atol=1e-5)
    np.testing.assert_allclose(ours_rand.explained_variance_ratio_, ref.explained_variance_ratio_, atol=1e-3)
    np.testing.assert_allclose(ours_exact.components_.numpy(), ref.components_, atol=1e-4)
    # randomized: the well-separated top-3 axes agree entrywise, signs included
    np.testing.assert_allclose(ours_rand.components_[:3].numpy(), ref.components_[:3], atol=1e-3)
    np.testing.assert_allclose(ours_exact.transform(gpt2_wpe).numpy(), ref.transform(gpt2_wpe), atol=2e-3)


@pytest.mark.parametrize(
    ("window", "expected"), [(None, 0.9039), ((1, 1024), 0.9106), ((100, 1024), 0.9511), ((1, 100), 0.9640)]
)
def test_blog_top3_ratios(gpt2_wpe, window, expected):
    res = pca(gpt2_wpe, 3, window=window)
    assert float(res.explained_variance_ratio_.sum()) == pytest.approx(expected, abs=1e-3)


def test_blog_stable_rank(gpt2_wpe):
    res = pca(gpt2_wpe, 3, window=(1, 512))
    assert float(res.stable_rank_) == pytest.approx(2.05, abs=0.01)
    a = gpt2_wpe[1:512].astype(np.float64)
    a = a - a.mean(0)
    assert float(res.stable_rank_) == pytest.approx((a**2).sum() / np.linalg.norm(a, 2) ** 2, rel=1e-4)


def test_randomized_accuracy_bound_subspace(gpt2_wpe):
    """Documented bound: ratios within 1e-3 and top-k subspace within 1e-2 rad when s_{k+1}/s_k <= 0.9."""
    for window in [None, (1, 1024), (100, 1024)]:
        ex = pca(gpt2_wpe, 20, window=window, solver="exact")
        s = ex.singular_values_
        for k in (3, 10):
            if s[k] / s[k - 1] > 0.9:
                continue
            rd = pca(gpt2_wpe, k, window=window, solver="randomized")
            cos = torch.linalg.svdvals(rd.components_.double() @ ex.components_[:k].double().T)
            assert float(torch.arccos(cos.min().clamp(max=1))) < 1e-2
            assert float(np.abs(rd.explained_variance_ratio_ - ex.explained_variance_ratio_[:k]).max()) < 1e-3


def test_batched_equals_single_and_indexing():
    mats = np.stack([helix_like(600, 64, seed=s) for s in range(3)])
    for solver in ("exact", "randomized"):
        batch = pca(mats, 4, solver=solver, window=(10, 590))
        assert batch.batched and len(batch) == 3
        assert batch.components_.shape == (3, 4, 64) and batch.coordinates.shape == (3, 580, 4)
        for i in range(3):
            single = pca(mats[i], 4, solver=solver, window=(10, 590))
            item = batch[i]
            assert not item.batched
            torch.testing.assert_close(item.components_, single.components_, atol=1e-5, rtol=0)
            torch.testing.assert_close(
                item.explained_variance_ratio_, single.explained_variance_ratio_, atol=1e-6, rtol=0
            )
            torch.testing.assert_close(item.coordinates, single.coordinates, atol=1e-4, rtol=0)
        assert batch[-1].provenance == batch.provenance[2]
        restacked = PCAResult.stack([batch[i] for i in range(3)])
        torch.testing.assert_close(restacked.components_, batch.components_)


def test_list_of_embeddings_provenance_and_window_recorded():
    embs = [
        PositionalEmbedding(
            torch.from_numpy(helix_like(120, 16, seed=s)), Provenance(f"m{s}", "learned", "test")
        )
        for s in range(2)
    ]
    res = pca(embs, 3, window=(20, None))
    assert res.window == (20, 120)
    torch.testing.assert_close(res.positions, torch.arange(20, 120))
    assert res.provenance[1].model_id == "m1"
    assert res.provenance[1].processing == ("rows[20:120]", "center_positions")
    assert pca(embs[0], 3).provenance.processing == ("center_positions",)
    assert pca(embs[0], 3, center=False).provenance.processing == ()


def test_float64_path_and_float32_agreement():
    x = helix_like(400, 50, seed=7, dtype=np.float64)
    r64 = pca(x, 5, solver="exact")
    assert r64.components_.dtype == torch.float64
    ref = sk_fit(x, 5)
    np.testing.assert_allclose(r64.explained_variance_ratio_, ref.explained_variance_ratio_, atol=1e-10)
    np.testing.assert_allclose(r64.components_.numpy(), ref.components_, atol=1e-8)
    r32 = pca(x.astype(np.float32), 5, solver="exact")
    assert r32.components_.dtype == torch.float32
    torch.testing.assert_close(r32.components_.double(), r64.components_, atol=1e-4, rtol=0)


def test_signs_deterministic_across_solvers_runs_dtypes_and_row_order(gpt2_wpe):
    base = pca(gpt2_wpe, 5, solver="exact")
    variants = [
        pca(gpt2_wpe, 5, solver="randomized"),
        pca(gpt2_wpe, 5, solver="randomized", random_state=123),
        pca(gpt2_wpe.astype(np.float64), 5, solver="exact"),
        pca(
            gpt2_wpe[np.random.default_rng(0).permutation(1024)], 5, solver="exact"
        ),  # same rows, other order
    ]
    for v in variants:
        torch.testing.assert_close(v.components_.float(), base.components_, atol=2e-3, rtol=0)
    again = pca(gpt2_wpe, 5, solver="randomized")
    assert torch.equal(again.components_, variants[0].components_)


def test_uncentred_matches_svd():
    x = helix_like(100, 20, seed=3)
    res = pca(x, 4, center=False, solver="exact")
    assert torch.equal(res.mean_, torch.zeros(20))
    _, s, vt = np.linalg.svd(x.astype(np.float64), full_matrices=False)
    np.testing.assert_allclose(res.singular_values_, s[:4], rtol=1e-5)
    np.testing.assert_allclose(res.explained_variance_ratio_, s[:4] ** 2 / (s**2).sum(), atol=1e-6)
    np.testing.assert_allclose(np.abs(res.components_.numpy()), np.abs(vt[:4]), atol=1e-4)


def test_transform_other_matrices_and_batches():
    x = helix_like(300, 24, seed=5)
    y = helix_like(50, 24, seed=6)
    res = pca(x, 3, solver="exact")
    ref = sk_fit(x, 3)
    np.testing.assert_allclose(res.transform(y).numpy(), ref.transform(y), atol=1e-4)
    assert res.transform(np.stack([y, y])).shape == (2, 50, 3)
    batch = pca(np.stack([x, x[::-1].copy()]), 3, solver="exact")
    out = batch.transform(y)
    assert out.shape == (2, 50, 3)
    np.testing.assert_allclose(out[1].numpy(), ref.transform(y), atol=1e-4)
    with pytest.raises(InvalidArgumentError, match="d=24"):
        res.transform(np.zeros((5, 7), dtype=np.float32))
    with pytest.raises(DeviceMismatchError):
        res.transform(torch.zeros(5, 24, device="meta"))


def test_auto_rule_and_summary(gpt2_wpe):
    assert pca(gpt2_wpe, 10).solver == "randomized"
    assert pca(gpt2_wpe, 100).solver == "exact"
    assert pca(gpt2_wpe[:300, :100], 3).solver == "exact"
    res = pca(gpt2_wpe, 10)
    text = res.summary()
    assert "top-3 variance ratio" in text and "0.90" in text and "randomized" in text
    data = json.loads(res.to_json())
    assert data["type"] == "PCAResult" and data["window"] == [0, 1024]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_components": 0}, r"between 1 and min\(n_positions in window, d_model\) = min\(50, 8\) = 8"),
        ({"n_components": 9}, "got 9"),
        ({"n_components": 3, "window": (10, 5)}, "selects no positions"),
        ({"n_components": 3, "solver": "arpack"}, "solver must be one of"),
        ({"n_components": 3, "n_iter": -1}, "n_iter"),
        ({"n_components": 1, "window": (3, 4)}, "at least 2 positions"),
    ],
)
def test_validation_errors(kwargs, match):
    x = np.zeros((50, 8), dtype=np.float32)
    with pytest.raises(InvalidArgumentError, match=match):
        pca(x, **kwargs)


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_total_variance_with_large_mean(offset):
    """The ratios' denominator stays accurate when the mean dwarfs the spread (centred-rows fallback)."""
    x = helix_like(600, 60, seed=11) + np.float32(offset)
    ref = sk_fit(x.astype(np.float64), 4)
    for solver in ("exact", "randomized"):
        res = pca(x, 4, solver=solver)
        np.testing.assert_allclose(res.explained_variance_ratio_, ref.explained_variance_ratio_, atol=1e-4)
        a = x.astype(np.float64) - x.astype(np.float64).mean(0)
        assert float(res.total_variance_) == pytest.approx((a**2).sum() / 599, rel=1e-5)


@pytest.mark.parametrize("solver", ["exact", "randomized"])
@pytest.mark.parametrize(
    ("window", "expected"), [(None, 0.9039), ((1, 1024), 0.9106), ((100, 1024), 0.9511), ((1, 100), 0.9640)]
)
def test_blog_top3_ratios_with_every_solver_and_the_oracle(gpt2_wpe, solver, window, expected):
    """The blog's figures from each solver, and from scikit-learn on the same rows (centred over positions)."""
    res = pca(gpt2_wpe, 3, window=window, solver=solver)
    assert res.solver == solver
    assert float(res.explained_variance_ratio_.sum()) == pytest.approx(expected, abs=1e-3)
    a, b = res.window
    oracle = PCA(n_components=3, svd_solver="full").fit(gpt2_wpe[a:b].astype(np.float64))
    assert float(oracle.explained_variance_ratio_.sum()) == pytest.approx(expected, abs=1e-3)
    tol = 1e-5 if solver == "exact" else 1e-3
    assert float(res.explained_variance_ratio_.sum()) == pytest.approx(
        float(oracle.explained_variance_ratio_.sum()), abs=tol
    )


def test_blog_figures_from_a_loaded_embedding(tmp_path, gpt2_wpe):
    """The same figures through the loader: a PositionalEmbedding keeps its provenance into the result."""
    import pos_geometry as pg

    np.save(tmp_path / "wpe.npy", gpt2_wpe)
    pe = pg.load(tmp_path / "wpe.npy")
    res = pca(pe.rows(1, None), 3)
    assert float(res.explained_variance_ratio_.sum()) == pytest.approx(0.9106, abs=1e-3)
    assert res.provenance.processing == ("rows[1:1024]", "center_positions")
    assert str(tmp_path / "wpe.npy") in res.provenance.source


def test_block_averaged_rows_projected_into_the_full_table_basis(gpt2_wpe):
    """The blog's overlay: 16-position block means, projected into the basis fitted on every row.

    Projection is affine, so a block mean's projection equals the mean of the block's coordinates,
    and matches scikit-learn's transform of the same block means.
    """
    res = pca(gpt2_wpe, 3, solver="exact")
    blocks = gpt2_wpe.reshape(64, 16, 768).mean(axis=1)
    projected = res.transform(blocks)
    assert projected.shape == (64, 3)
    expected = res.coordinates.reshape(64, 16, 3).mean(dim=1)
    torch.testing.assert_close(projected, expected, atol=1e-4, rtol=0)
    oracle = PCA(n_components=3, svd_solver="full").fit(gpt2_wpe.astype(np.float64))
    np.testing.assert_allclose(projected.numpy(), oracle.transform(blocks.astype(np.float64)), atol=1e-3)


@pytest.mark.parametrize("window", [(100, 2000), (2000, 3000), (0, 1025), (-1100, None)])
def test_a_window_past_the_table_is_refused_never_clipped(gpt2_wpe, window):
    """Issue 21: (100, 2000) on 1024 rows used to analyse 100:1024 silently while (2000, 3000) was refused."""
    with pytest.raises(InvalidArgumentError, match="past the table's 1024 positions"):
        pca(gpt2_wpe, 3, window=window)
    assert tuple(pca(gpt2_wpe, 3, window=(-24, None)).window) == (
        1000,
        1024,
    )  # slice semantics within the table


@pytest.mark.parametrize("solver", ["exact", "randomized"])
@pytest.mark.parametrize("unit", [1e-3, 7.0, 1e20, 1e-30])
def test_fitting_in_units_of_the_largest_entry_is_the_fit_of_the_divided_table(solver, unit):
    # fit_batch fits a table whose entries are of ordinary size as it is and divides the results afterwards
    # (a pass over the data saved); beyond 2**±40 it divides the table first. Either way the result must be
    # the fit of the divided table: the same components, s, coordinates, mean and total sum of squares.
    from pos_geometry.analysis._pca_solvers import fit_batch

    x = torch.from_numpy(np.stack([helix_like(600, 300, seed) for seed in (0, 1)])) * unit
    scale = x.abs().amax(dim=(1, 2)).double()
    kwargs = dict(center=True, solver=solver, n_oversamples=10, n_iter=7, random_state=0)
    got = fit_batch(x, 5, scale=scale, **kwargs)
    want = fit_batch(x / scale.float().view(-1, 1, 1), 5, **kwargs)
    for a, b in zip(got[:5], want[:5], strict=True):
        torch.testing.assert_close(a, b, rtol=2e-5, atol=2e-5 * float(b.abs().max()))
    torch.testing.assert_close(got[5], scale)
    torch.testing.assert_close(want[5], torch.ones(2, dtype=torch.float64))
