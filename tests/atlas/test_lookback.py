"""The look-back measures on a helix with a known turn and a head with a known rotation."""

from __future__ import annotations

import math

import pytest
import torch

from pos_geometry.atlas.lookback import implied_offset, plane_step, rotation_in_plane, toeplitz_share

N, OMEGA, PHI = 256, 2 * math.pi / 64, 0.6


def _helix_and_head():
    t = torch.arange(N, dtype=torch.float64)
    x = torch.zeros(N, 6, dtype=torch.float64)
    x[:, 0], x[:, 1], x[:, 2] = torch.cos(OMEGA * t), torch.sin(OMEGA * t), 0.01 * t  # a helix along dim 2
    rotation = torch.tensor(
        [[math.cos(PHI), -math.sin(PHI)], [math.sin(PHI), math.cos(PHI)]], dtype=torch.float64
    )
    a, b = torch.zeros(6, 2, dtype=torch.float64), torch.zeros(6, 2, dtype=torch.float64)
    a[:2], b[:2] = rotation, torch.eye(2)  # the form A Bᵀ on the plane is R(φ)
    plane = torch.zeros(6, 2, dtype=torch.float64)
    plane[0, 0] = plane[1, 1] = 1
    return x, a, b, plane


def test_a_rotating_head_on_a_helix_looks_back_phi_over_omega():
    x, a, b, plane = _helix_and_head()
    step = plane_step(x, plane)
    assert step == pytest.approx(OMEGA, rel=1e-12)
    fit, angle = rotation_in_plane((plane.T @ a) @ (plane.T @ b).T)
    assert fit == pytest.approx(1.0) and angle == pytest.approx(PHI)
    position = (x @ a) @ (x @ b).T
    profile = torch.stack([position.diagonal(-d).mean() for d in range(64)])
    assert implied_offset(angle, step) == pytest.approx(PHI / OMEGA)  # 6.11 positions back
    assert int(profile.argmax()) == round(PHI / OMEGA)  # where the logits really peak
    assert toeplitz_share(position) == pytest.approx(1.0)
    shuffled = (x @ a) @ (x[torch.randperm(N, generator=torch.Generator().manual_seed(0))] @ b).T
    assert toeplitz_share(shuffled) < 0.05  # the null: a key order unrelated to position


def test_a_symmetric_form_is_no_rotation_and_a_flat_table_has_no_step():
    fit, _ = rotation_in_plane(torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64))
    assert fit == pytest.approx(0.0)
    assert math.isnan(implied_offset(0.3, 0.0))
