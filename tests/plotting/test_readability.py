"""Figures a reader can read: long subplot titles wrap, a colour bar is shared only by tables it fits, each
head's logits are shown on its own scale, ratios of very different sizes sit on a log axis, and a look-back
plot leaves out the heads with no look-back and marks the table's end."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry import PositionalEmbedding, PositionQKAtlas, Provenance
from pos_geometry.plotting import plot_helix_grid, plot_position_qk_lookback, plot_position_qk_offsets


def _table(n: int, seed: int = 0) -> PositionalEmbedding:
    t = np.arange(float(n))[:, None]
    x = np.concatenate([np.cos(t / 40), np.sin(t / 40), t / n], axis=1) @ np.random.default_rng(seed).normal(
        size=(3, 8)
    )
    return PositionalEmbedding(
        torch.from_numpy(x), Provenance(f"table-{n}-with-a-rather-long-name", "learned", "t")
    )


def test_a_grid_of_tables_of_different_lengths_colours_each_by_its_own_rows():
    fig = plot_helix_grid([_table(1024), _table(512, 1)])
    points = [t for t in fig.data if t.mode == "markers"]
    assert [float(np.max(p.marker.color)) for p in points] == [1.0, 1.0]  # each spans the whole colour bar
    assert "share of" in fig.layout.coloraxis.colorbar.title.text
    same = plot_helix_grid([_table(512), _table(512, 1)])
    assert [int(np.max(t.marker.color)) for t in same.data if t.mode == "markers"] == [511, 511]
    assert same.layout.coloraxis.colorbar.title.text == "position"
    assert all(len(line) <= 52 for a in fig.layout.annotations for line in a.text.split("<br>"))


def _atlas(scales, null=False):
    n_layers, n_heads, n = len(scales), 2, 64
    offsets = torch.arange(n, dtype=torch.float64)
    profile = torch.stack(
        [torch.stack([s * torch.cos(offsets / 8 + h) for h in range(n_heads)]) for s in scales]
    )
    share = torch.full((n_layers, n_heads), 0.5, dtype=torch.float64)
    return PositionQKAtlas(
        form_share=share, logit_share=share, offset_profile=profile, offset_r2=share, logit_std=share,
        explained_variance_ratio=torch.full((n_layers, 2), 0.4, dtype=torch.float64), layers=tuple(range(n_layers)),
        n_components=2, n_positions=n, provenance=Provenance("toy", "learned", "synthetic"),
        peak_offset=torch.tensor([[0, 5]] * n_layers), permuted_key_rows=null,
        toeplitz_share=share, rotation_fit=torch.full((n_layers, n_heads), 0.95, dtype=torch.float64),
        rotation_angle=torch.full((n_layers, n_heads), 0.3, dtype=torch.float64),
        plane_step=torch.full((n_layers,), 2 * math.pi / 64, dtype=torch.float64),
    )  # fmt: skip


def test_each_head_is_drawn_on_its_own_scale():
    fig = plot_position_qk_offsets(_atlas([1.0, 1000.0]))  # layer 1's logits are a thousand times larger
    z = np.asarray(fig.data[0].z)
    np.testing.assert_allclose(z.std(axis=1), 1.0, atol=1e-9)  # every row its own spread: layer 0 still shows
    raw = np.asarray(fig.data[0].customdata)
    assert raw[2:].std() / raw[:2].std() == pytest.approx(1000.0)  # the raw scale is kept for the hover
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1"]


def test_the_look_back_plot_leaves_out_heads_with_no_look_back_and_marks_the_tables_end():
    fig = plot_position_qk_lookback(_atlas([1.0, 2.0]), _atlas([1.0, 2.0], null=True))
    trained = next(t for t in fig.data if (t.name or "").startswith("trained heads"))
    assert trained.name == "trained heads: 2" and list(trained.x) == [6, 6]  # the two heads peaking at 5
    assert any(s.y0 == s.y1 == 65 for s in fig.layout.shapes)  # the line at the table's last position + 1
    assert fig.layout.margin.t >= 120 and "<br>" in fig.layout.annotations[0].text


def test_the_atlas_of_a_real_table_reads_on_every_scale(real_data_dir):
    del real_data_dir
    view = pg.position_qk_atlas("gpt2")
    z = np.asarray(plot_position_qk_offsets(view).data[0].z)
    spread = z.std(axis=1)
    assert np.all((spread > 0.99) | (spread == 0))
