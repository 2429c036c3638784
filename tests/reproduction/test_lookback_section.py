"""The look-back claim's rule on constructed atlases (the real GPT-2 numbers are in test_runner.py)."""

from __future__ import annotations

import math

import pytest
import torch

from pos_geometry import PositionQKAtlas, Provenance
from pos_geometry.reproduction.lookback_section import claim_lookback, lookback_section

STEP = 2 * math.pi / 500  # the table turns once in 500 positions


def _atlas(toeplitz: float, rotation: float, peaks: list[int], implied: list[float], null: bool = False):
    n = len(peaks)
    angle = torch.tensor([v * STEP for v in implied], dtype=torch.float64)[None]
    share = torch.full((1, n), 0.5, dtype=torch.float64)
    return PositionQKAtlas(
        form_share=share, logit_share=share, offset_profile=torch.zeros(1, n, 1000, dtype=torch.float64),
        offset_r2=share, logit_std=share, explained_variance_ratio=torch.full((1, 2), 0.4, dtype=torch.float64),
        layers=(0,), n_components=2, n_positions=1000, provenance=Provenance("toy", "learned", "synthetic"),
        peak_offset=torch.tensor([peaks]), permuted_key_rows=null,
        toeplitz_share=torch.full((1, n), toeplitz, dtype=torch.float64),
        rotation_fit=torch.full((1, n), rotation, dtype=torch.float64), rotation_angle=angle,
        plane_step=torch.tensor([STEP], dtype=torch.float64),
    )  # fmt: skip


NULL = _atlas(0.2, 0.5, [3, 200, 0, 400], [90.0, 10.0, 5.0, 300.0], null=True)


@pytest.mark.parametrize(
    "view, verdict",
    [
        (_atlas(0.7, 0.95, [5, 200, 0, 400], [5.5, 210.0, 3.0, 390.0]), "reproduced"),
        (
            _atlas(0.7, 0.95, [5, 200, 0, 400], [14.0, 210.0, 3.0, 390.0]),
            "partly reproduced",
        ),  # short one off
        (_atlas(0.7, 0.95, [5, 200, 0, 400], [14.0, 100.0, 3.0, 100.0]), "not reproduced"),  # rotation ≠ peak
        (_atlas(0.1, 0.95, [5, 200, 0, 400], [5.5, 210.0, 3.0, 390.0]), "not reproduced"),  # below the null
    ],
)
def test_the_verdict_follows_the_criterion(view, verdict):
    claim = claim_lookback(view, NULL)
    assert claim.verdict == verdict, claim.measured
    assert claim.key == "look_back" and len(claim.values["heads"]) == 4
    assert claim.values["rotating_heads_null"] == 0 and "direct path" in claim.measured


def test_missing_weights_are_not_measured(tmp_path, monkeypatch):
    assert claim_lookback(None, None).verdict == "not measured"
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pg"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv(
        "POS_GEOMETRY_DATA", str(tmp_path)
    )  # no real tables or weights beside the checkout either
    section = lookback_section(tmp_path, online=False)
    assert section.claim.verdict == "not measured" and section.view is None and not section.figures
    assert "pos-geometry atlas gpt2 --out atlas --online" in section.markdown
