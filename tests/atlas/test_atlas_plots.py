"""Atlas figures carry exactly the atlas's numbers, on a log-wavelength axis with the context marked."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from pos_geometry import InvalidArgumentError, rotary_atlas
from pos_geometry.plotting import plot_atlas_head, plot_atlas_heatmap, plot_atlas_usage


@pytest.fixture(scope="module")
def atlas(tmp_path_factory):
    import transformers

    config = transformers.MistralConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=2, vocab_size=50, max_position_embeddings=256,
    )  # fmt: skip
    folder = tmp_path_factory.mktemp("tiny_mistral")
    transformers.MistralForCausalLM(config).save_pretrained(folder)
    return rotary_atlas(folder, model_id="tiny-mistral")


def _vline_x(fig: go.Figure) -> list[float]:
    return [shape.x0 for shape in fig.layout.shapes if shape.x0 == shape.x1]


def test_heatmap_rows_are_layer_head_and_columns_wavelengths(atlas):
    fig = plot_atlas_heatmap(atlas)
    (heat,) = fig.data
    np.testing.assert_allclose(np.asarray(heat.z), atlas.qk_share.numpy().reshape(8, 8))
    np.testing.assert_allclose(np.asarray(heat.x), atlas.wavelengths.numpy())
    assert [row[0] for row in heat.text][:5] == ["L0 H0", "L0 H1", "L0 H2", "L0 H3", "L1 H0"]
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1"]  # one label per layer, a line between layers
    assert [s.y0 for s in fig.layout.shapes if s.y0 == s.y1] == [3.5]
    assert fig.layout.xaxis.type == "log"
    assert _vline_x(fig) == [256.0]
    assert fig.layout.title.text.startswith("tiny-mistral: share of the head's QK form")
    other = plot_atlas_heatmap(atlas, value="k_pair_cosine")
    np.testing.assert_allclose(np.asarray(other.data[0].z), atlas.k_pair_cosine.numpy().reshape(8, 8))
    with pytest.raises(InvalidArgumentError, match="value must be one of"):
        plot_atlas_heatmap(atlas, value="nope")


def test_usage_has_one_line_per_layer(atlas):
    fig = plot_atlas_usage(atlas)
    assert [t.name for t in fig.data if t.name] == ["layer 0", "layer 1"]
    (bar,) = [t for t in fig.data if not t.name]  # the colour bar that says which colour is which layer
    assert bar.marker.colorbar.title.text == "layer" and (bar.marker.cmin, bar.marker.cmax) == (0, 1)
    (uniform,) = [s for s in fig.layout.shapes if s.y0 == s.y1]
    assert uniform.y0 == pytest.approx(1 / atlas.qk_share.shape[-1])
    np.testing.assert_allclose(np.asarray(fig.data[1].y), atlas.qk_share[1].mean(0).numpy())
    assert _vline_x(fig) == [256.0]


def test_head_profile(atlas):
    fig = plot_atlas_head(atlas, 1, 3)
    assert len(fig.data) == 5
    np.testing.assert_allclose(np.asarray(fig.data[0].y), atlas.qk_share[1, 3].numpy())
    np.testing.assert_allclose(np.asarray(fig.data[2].y), atlas.k_norm[1, 3].numpy())
    assert "key head 1" in fig.data[2].name
    assert "layer 1, head 3" in fig.layout.title.text
    with pytest.raises(InvalidArgumentError, match="layer must be one of"):
        plot_atlas_head(atlas, 5, 0)
