"""Which heads lean on the fast planes: a permutation test per head, Holm over heads (``atlas/plane_preference.py``).

A head of random weights is above the uniform share about half the time, so the count of heads above it
says nothing; the test must call no head of random weights leaning (beyond α, family-wise), find planted
ones, and give the exact permutation p where the subsets can be counted.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry._multiple import holm
from pos_geometry.atlas.plane_preference import plane_preference
from pos_geometry.atlas.plane_statistics import plane_statistics, usage_summaries
from pos_geometry.atlas.rotary_result import RotaryAtlas
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.provenance import Provenance


def _random_atlas(seed: int, *, lean: float = 1.0, leaning_heads: int = 0, n_layers: int = 4, n_heads: int = 4,
                  head_dim: int = 32, d_model: int = 96, context: int = 512) -> RotaryAtlas:  # fmt: skip
    """A rotary atlas of isotropic Gaussian q/k weights (rotate-half planes, base 10000), the fast planes' rows of
    the first ``leaning_heads`` query heads of each layer scaled by ``lean``."""
    g = torch.Generator().manual_seed(seed)
    half = head_dim // 2
    planes = torch.stack([torch.arange(half), torch.arange(half) + half], 1)
    wavelengths = 2 * math.pi * 10000.0 ** (2 * torch.arange(half, dtype=torch.float64) / head_dim)
    critical = wavelengths <= context
    shares = []
    for _ in range(n_layers):
        q = torch.randn(n_heads, head_dim, d_model, generator=g, dtype=torch.float64)
        k = torch.randn(n_heads, head_dim, d_model, generator=g, dtype=torch.float64)
        q[:leaning_heads, planes[critical].flatten()] *= lean
        shares.append(plane_statistics(q, k, planes, device="cpu")[2])
    share = torch.stack(shares)
    summary = usage_summaries(share, critical)
    zero = torch.zeros_like(share)
    return RotaryAtlas(
        q_norm=zero, k_norm=zero, qk_share=share, q_pair_cosine=zero, k_pair_cosine=zero, wavelengths=wavelengths,
        critical=critical, short_share=summary["short_share"], layer_usage=summary["layer_usage"],
        layers=tuple(range(n_layers)), kv_heads=tuple(range(n_heads)), context_length=context,
        critical_dimension=2 * int(critical.sum()), fold_norm=False, pairing="rotate_half",
        provenance=Provenance("random-weights", "rotary", "test"),
    )  # fmt: skip


def test_random_weights_put_half_the_heads_above_uniform_and_none_lean():
    above, any_leaning, p_values = [], 0, []
    for seed in range(40):
        atlas = _random_atlas(seed)
        uniform = float(atlas.layer_critical.sum(-1).double().mean()) / atlas.shape[2]
        above.append(float((atlas.short_share > uniform).double().mean()))
        found = plane_preference(atlas, random_state=seed)
        any_leaning += found.n_leaning > 0
        p_values.append(found.p_value.flatten())
    assert 0.35 < np.mean(above) < 0.65  # what the card used to count as heads that lean
    assert any_leaning <= 5  # family-wise: α = 0.05 over 40 models, + 2 SE ≈ 4.8 → 5
    p = torch.cat(p_values).numpy()
    assert abs(float(np.mean(p)) - 0.5) < 0.05  # a valid p-value is uniform under the null
    assert float(np.mean(p <= 0.05)) < 0.08


@pytest.mark.parametrize("lean", [1.15, 1.5])
def test_planted_heads_and_only_they_lean(lean):
    atlas = _random_atlas(7, lean=lean, leaning_heads=2)
    found = plane_preference(atlas)
    truth = torch.zeros(atlas.shape[:2], dtype=torch.bool)
    truth[:, :2] = True
    assert torch.equal(found.leaning, truth)
    assert found.n_tested == truth.numel() and found.reason == ""
    assert found.min_p_value == pytest.approx(1 / (found.n_permutations + 1)) and found.can_lean
    assert found.provenance.processing[-1].startswith("plane_preference(alpha=0.05")


def test_the_exact_p_counts_every_subset_and_the_monte_carlo_one_agrees():
    atlas = _random_atlas(3, head_dim=12, context=200)  # 6 planes, 3 fast: 20 subsets
    share = atlas.qk_share[0]
    fast = atlas.layer_critical[0]
    m = int(fast.sum())
    assert 0 < m < 6
    exact = plane_preference(atlas, n_permutations=math.comb(6, m)).p_value[0]
    for h in range(share.shape[0]):
        observed = float(share[h, fast].sum())
        sums = [float(share[h, list(c)].sum()) for c in itertools.combinations(range(6), m)]
        assert float(exact[h]) == pytest.approx(np.mean([v >= observed - 1e-12 for v in sums]), abs=1e-12)
    sampled = plane_preference(atlas, n_permutations=math.comb(6, m) - 1, random_state=1).p_value[0]
    assert torch.allclose(sampled, exact, atol=0.12)  # Monte Carlo over 19 subsets: within sampling error


def test_holm_is_the_step_down_correction():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([]) == []


def test_a_layer_with_every_plane_fast_has_nothing_to_compare():
    atlas = _random_atlas(0)
    every = dataclasses.replace(atlas, context_length=10**9)
    found = plane_preference(every)
    assert found.n_tested == 0 and found.n_leaning == 0 and bool(torch.isnan(found.p_value).all())
    assert (
        "every plane turns within the span, or none does" in found.reason
        and "layers 0, 1, 2, 3" in found.reason
    )


@pytest.mark.parametrize(("kwargs", "words"), [({"alpha": 1.5}, "alpha must lie strictly between 0 and 1; got 1.5"),
                                               ({"n_permutations": 0}, "n_permutations must be a positive integer; got 0")])  # fmt: skip
def test_bad_arguments_say_the_rule_and_the_fix(kwargs, words):
    with pytest.raises(InvalidArgumentError, match=r"Pass e\.g\.") as info:
        plane_preference(_random_atlas(0, n_layers=1), **kwargs)
    assert words in str(info.value)


def test_a_model_with_few_planes_is_tested_exactly_and_cannot_lean(kind_models):
    # The cards' tiny Llama: 4 planes, 2 of them within its 128-position context: 6 subsets, each head's p a
    # multiple of 1/6, and none below 1/6 > α/8 (Holm's first step over its 8 heads): no head can pass.
    atlas = pg.rotary_atlas(kind_models["rotary"][0], fold_norm=True, device="cpu")
    subsets = math.comb(atlas.shape[2], int(atlas.layer_critical[0].sum()))
    assert subsets == 6
    found = plane_preference(atlas)
    assert found.n_tested == atlas.shape[0] * atlas.shape[1] == 8 and found.n_leaning == 0
    assert found.min_p_value == pytest.approx(1 / subsets) and not found.can_lean
    assert float(found.p_value.min()) >= 1 / subsets - 1e-12
    counts = found.p_value.flatten().numpy() * subsets
    assert np.allclose(counts, np.round(counts), atol=1e-9)


def test_the_result_summarises_and_serialises_like_the_others():
    atlas = _random_atlas(3, lean=1.5, leaning_heads=1)
    found = plane_preference(atlas)
    assert found.leaning_heads() == [tuple(v) for v in torch.nonzero(found.leaning).tolist()]
    assert found.n_leaning == len(found.leaning_heads()) >= 1
    rows = dict(found.summary_rows())
    assert rows["heads tested"] == f"{found.n_tested} of {found.p_value.numel()}"
    assert rows["heads that lean on the fast planes"].startswith(f"{found.n_leaning} (Holm")
    assert rows["leaning (layer index.head)"].startswith(
        f"{found.leaning_heads()[0][0]}.{found.leaning_heads()[0][1]}"
    )
    assert float(rows["smallest p"]) == pytest.approx(float(found.p_value.min()), rel=1e-2)
    out = json.loads(found.to_json())
    assert out["type"] == "PlanePreference"
    assert np.array_equal(np.array(out["leaning"]), found.leaning.numpy())
    assert np.allclose(np.array(out["p_value"], dtype=float), found.p_value.numpy())
    assert out["provenance"]["processing"][-1].startswith("plane_preference(")
    assert repr(found).startswith("<PlanePreference of random-weights: heads tested:")
    assert "\n" not in repr(found)


def test_the_summary_says_when_no_head_can_lean_and_which_layers_were_not_tested():
    few = _random_atlas(0, n_layers=1, head_dim=8, context=64)  # 4 planes, 2 fast: 6 subsets, p ≥ 1/6
    found = plane_preference(few)
    assert found.n_tested == 4 and found.min_p_value == pytest.approx(1 / 6) and not found.can_lean
    assert "above α/4, so no head can be called leaning" in dict(found.summary_rows())["smallest p possible"]
    none = plane_preference(dataclasses.replace(few, context_length=10**9))
    rows = dict(none.summary_rows())
    assert rows["heads tested"] == f"0 of {none.p_value.numel()}"
    assert "every plane turns within the span" in rows["not tested"]
    assert json.loads(none.to_json())["p_value"][0][0] is None  # NaN written as null
