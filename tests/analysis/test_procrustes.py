"""pos_geometry.analysis.procrustes: aligning PCA bases across checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.linalg import orthogonal_procrustes
from scipy.stats import special_ortho_group

from pos_geometry.analysis.pca import pca
from pos_geometry.analysis.procrustes import align_bases, procrustes_rotation
from pos_geometry.errors import InvalidArgumentError


def _random_orthogonal(k: int, seed: int, reflect: bool) -> np.ndarray:
    q = special_ortho_group.rvs(k, random_state=seed)
    if reflect:
        q[:, 0] *= -1
    return q


def test_rotated_flipped_permuted_copies_align_back(gpt2_wpe):
    ref = pca(gpt2_wpe, 4, solver="exact")
    k = 4
    transforms = [
        _random_orthogonal(k, 1, reflect=False),
        _random_orthogonal(k, 2, reflect=True),
        np.diag([1.0, -1.0, 1.0, -1.0]),
        np.eye(k)[[2, 0, 3, 1]],
    ]
    mats = torch.stack([torch.from_numpy(t).float() for t in transforms])
    batch = pca(np.stack([gpt2_wpe] * 4), k, solver="exact")
    import dataclasses

    scrambled = dataclasses.replace(
        batch,
        components_=mats @ batch.components_,
        coordinates=batch.coordinates @ mats.mT,
    )
    aligned = align_bases(scrambled, ref)
    for i in range(4):
        torch.testing.assert_close(aligned.components_[i], ref.components_, atol=1e-5, rtol=0)
        torch.testing.assert_close(aligned.coordinates[i], ref.coordinates, atol=1e-3, rtol=0)
        torch.testing.assert_close(aligned.rotation_[i], mats[i].T, atol=1e-5, rtol=0)
        assert aligned.provenance[i].processing[-1] == "procrustes_aligned"
    # with ordered, uncorrelated axes the per-axis variance is recovered exactly
    torch.testing.assert_close(
        aligned.explained_variance_ratio_[1], ref.explained_variance_ratio_, atol=1e-5, rtol=0
    )


def test_rotation_matches_scipy():
    rng = np.random.default_rng(0)
    a = np.linalg.qr(rng.standard_normal((30, 3)))[0].T
    b = np.linalg.qr(rng.standard_normal((30, 3)))[0].T
    r = procrustes_rotation(torch.from_numpy(a), torch.from_numpy(b))
    r_scipy, _ = orthogonal_procrustes(a.T, b.T)  # minimises ||a.T R - b.T||
    np.testing.assert_allclose(r.numpy(), r_scipy.T, atol=1e-10)


def test_no_reflection_gives_proper_rotation():
    rng = np.random.default_rng(1)
    a = torch.from_numpy(np.linalg.qr(rng.standard_normal((20, 3)))[0].T)
    flipped = torch.diag(torch.tensor([-1.0, 1.0, 1.0], dtype=a.dtype)) @ a
    r = procrustes_rotation(flipped, a, allow_reflection=False)
    assert float(torch.linalg.det(r)) == pytest.approx(1.0)
    r_any = procrustes_rotation(flipped, a)
    assert float(torch.linalg.det(r_any)) == pytest.approx(-1.0)
    torch.testing.assert_close(r_any @ flipped, a)


def test_chain_alignment_of_a_slowly_rotating_sweep(gpt2_wpe):
    base = pca(gpt2_wpe, 3, solver="exact")
    angles = np.linspace(0, np.pi, 7)
    rots = []
    for t in angles:
        c, s = np.cos(t), np.sin(t)
        rots.append([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    mats = torch.tensor(np.array(rots), dtype=torch.float32)
    batch = pca(np.stack([gpt2_wpe] * 7), 3, solver="exact")
    import dataclasses

    sweep = dataclasses.replace(
        batch, components_=mats @ batch.components_, coordinates=batch.coordinates @ mats.mT
    )
    chained = align_bases(sweep, "previous")
    for i in range(7):
        torch.testing.assert_close(chained.components_[i], sweep.components_[0], atol=1e-4, rtol=0)
    assert chained.provenance[0].processing[-1] == "procrustes_aligned(previous)"
    single = align_bases(sweep[3], base)
    assert not single.batched
    torch.testing.assert_close(single.components_, base.components_, atol=1e-4, rtol=0)


def test_subspace_and_totals_unchanged(gpt2_wpe):
    res = pca(np.stack([gpt2_wpe, gpt2_wpe[::-1] * 1.5]), 3)
    aligned = align_bases(res, 0)
    proj_before = res.components_.mT @ res.components_
    proj_after = aligned.components_.mT @ aligned.components_
    torch.testing.assert_close(proj_after, proj_before, atol=1e-5, rtol=0)
    torch.testing.assert_close(
        aligned.explained_variance_.sum(-1), res.explained_variance_.sum(-1), rtol=1e-5, atol=0
    )


def test_errors(gpt2_wpe):
    res = pca(np.stack([gpt2_wpe] * 2), 3)
    with pytest.raises(InvalidArgumentError, match="out of range"):
        align_bases(res, 5)
    with pytest.raises(InvalidArgumentError, match="'previous'"):
        align_bases(res, "first")
    with pytest.raises(InvalidArgumentError, match="same k and d"):
        align_bases(res, torch.zeros(4, 768))
