"""pos_geometry.analysis.subspace: token embeddings vs the positional PCA subspace."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.linalg import subspace_angles

from pos_geometry.analysis.pca import pca
from pos_geometry.analysis.subspace import principal_angles, subspace_overlap
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError


@pytest.fixture(scope="module")
def positions() -> np.ndarray:
    rng = np.random.default_rng(0)
    t = np.linspace(0, 2 * np.pi, 256)[:, None]
    curve = np.concatenate([np.cos(t), np.sin(t), t / 3, np.cos(2 * t) / 2], axis=1)
    basis = np.linalg.qr(rng.standard_normal((64, 4)))[0].T
    return (curve @ basis + 0.01 * rng.standard_normal((256, 64))).astype(np.float32)


def _basis(positions: np.ndarray, k: int) -> np.ndarray:
    return pca(positions, k, solver="exact").components_.double().numpy()


def test_tokens_orthogonal_to_positional_subspace(positions):
    rng = np.random.default_rng(1)
    p = _basis(positions, 3)
    t = rng.standard_normal((2000, 64))
    t = t - (t @ p.T) @ p  # remove the positional subspace
    res = subspace_overlap(positions, t, 3)
    assert res.token_variance_fraction < 1e-10 and res.token_norm_fraction < 1e-10
    assert res.random_fraction == pytest.approx(3 / 64)
    assert float(res.principal_angles_deg.min()) > 80


def test_tokens_inside_positional_subspace(positions):
    rng = np.random.default_rng(2)
    p = _basis(positions, 3)
    t = rng.standard_normal((500, 3)) @ p
    res = subspace_overlap(positions, t, 3)
    assert res.token_variance_fraction == pytest.approx(1.0, abs=1e-6)
    assert res.token_norm_fraction == pytest.approx(1.0, abs=1e-6)
    assert float(res.principal_angles_deg.max()) < 0.1


def test_random_tokens_near_k_over_d(positions):
    rng = np.random.default_rng(3)
    t = torch.from_numpy(rng.standard_normal((20000, 64)).astype(np.float32))
    res = subspace_overlap(positions, t, 4)
    assert res.token_variance_fraction == pytest.approx(4 / 64, rel=0.1)
    assert res.token_norm_fraction == pytest.approx(4 / 64, rel=0.1)
    assert res.variance_fraction_vs_random == pytest.approx(1.0, rel=0.1)


def test_principal_angles_match_scipy():
    rng = np.random.default_rng(4)
    for p, q in [(3, 3), (2, 4), (5, 1)]:
        a = rng.standard_normal((p, 40))
        b = rng.standard_normal((q, 40))
        ours = np.sort(principal_angles(torch.from_numpy(a), torch.from_numpy(b)).numpy())
        np.testing.assert_allclose(ours, np.sort(subspace_angles(a.T, b.T)), atol=1e-12)
    # nearly identical subspaces: small angles need the sine formula
    a = rng.standard_normal((3, 40))
    b = a + 1e-9 * rng.standard_normal((3, 40))
    ours = np.sort(principal_angles(torch.from_numpy(a), torch.from_numpy(b)).numpy())
    np.testing.assert_allclose(ours, np.sort(subspace_angles(a.T, b.T)), atol=1e-14)


def test_result_angles_match_scipy_and_provenance(positions):
    rng = np.random.default_rng(5)
    t = rng.standard_normal((3000, 64)).astype(np.float32) * np.linspace(0.1, 3, 64).astype(np.float32)
    pe = PositionalEmbedding(torch.from_numpy(positions), Provenance("toy", "learned", "test"))
    tprov = Provenance("toy", "learned", "test::wte")
    res = subspace_overlap(pe, torch.from_numpy(t), 3, token_provenance=tprov)
    expected = np.rad2deg(
        subspace_angles(res.positional_components.double().numpy().T, res.token_components.double().numpy().T)
    )
    np.testing.assert_allclose(np.sort(res.principal_angles_deg.numpy()), np.sort(expected), atol=1e-3)
    assert res.provenance.model_id == "toy" and res.token_provenance.source == "test::wte"
    assert "token variance in it" in res.summary()


def test_gpt2_positions_vs_isotropic_tokens(gpt2_wpe):
    """Real positional subspace vs synthetic tokens: isotropic tokens give k/d (sanity of the real path)."""
    rng = np.random.default_rng(6)
    t = rng.standard_normal((5000, 768)).astype(np.float32)
    res = subspace_overlap(gpt2_wpe, t, 3)
    assert res.token_variance_fraction == pytest.approx(3 / 768, rel=0.2)


def test_errors(positions):
    with pytest.raises(InvalidArgumentError, match="d_model=64"):
        subspace_overlap(positions, np.zeros((10, 32), dtype=np.float32))
    tokens = np.random.default_rng(7).standard_normal((10, 64)).astype(np.float32)
    with pytest.raises(InvalidArgumentError, match=r"one per table; got 3 token matrices for 2"):
        subspace_overlap(np.stack([positions, positions]), [tokens] * 3)
    with pytest.raises(InvalidArgumentError, match="non-zero variance"):
        subspace_overlap(positions, np.zeros((10, 64), dtype=np.float32))
    with pytest.raises(InvalidArgumentError, match="floating-point"):
        subspace_overlap(positions, np.zeros((10, 64), dtype=np.int64))


def test_batch_of_tables_equals_one_call_per_table(positions):
    """A batch of positional tables (shared or per-table tokens) gives the per-table results, in order."""
    from pos_geometry.analysis._batch import BatchResult

    rng = np.random.default_rng(8)
    tables = [positions, positions[::-1].copy() * 2.0, positions + rng.standard_normal(64).astype(np.float32)]
    embs = [
        PositionalEmbedding(torch.from_numpy(t), Provenance(f"ckpt{i}", "learned", "test"))
        for i, t in enumerate(tables)
    ]
    tokens = [rng.standard_normal((400, 64)).astype(np.float32) * np.linspace(0.2, 2, 64).astype(np.float32)]
    tokens += [rng.standard_normal((400, 64)).astype(np.float32) for _ in range(2)]
    shared = subspace_overlap(embs, tokens[0], 3, window=(1, None))
    per_table = subspace_overlap(np.stack(tables), np.stack(tokens), 3, window=(1, None))
    for batch, toks in ((shared, [tokens[0]] * 3), (per_table, tokens)):
        assert isinstance(batch, BatchResult) and len(batch) == 3
        for i, item in enumerate(batch):
            single = subspace_overlap(tables[i], toks[i], 3, window=(1, None))
            assert item.token_variance_fraction == pytest.approx(
                single.token_variance_fraction, rel=1e-5, abs=1e-9
            )
            assert item.token_norm_fraction == pytest.approx(single.token_norm_fraction, rel=1e-5, abs=1e-9)
            torch.testing.assert_close(
                item.principal_angles_deg, single.principal_angles_deg, atol=1e-2, rtol=0
            )
            assert item.window == (1, 256)
    assert [r.provenance.model_id for r in shared] == ["ckpt0", "ckpt1", "ckpt2"]
    assert shared[1].provenance.processing == ("rows[1:256]", "center_positions")
    assert "token variance in it" in shared.summary()
    assert json.loads(shared.to_json())["type"] == "BatchResult"
