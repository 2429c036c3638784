"""Figures of hidden-state positions and attention by offset: what they hold, checked against the results."""

from __future__ import annotations

import numpy as np
import pytest

import pos_geometry as pg
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.hidden import METRIC_NAMES
from pos_geometry.plotting import plot_attention_offsets, plot_hidden_metrics, plot_hidden_trajectory


@pytest.fixture(scope="module")
def results(tiny_gpt2):
    tokens = np.random.default_rng(0).integers(0, 50, size=(6, 40))
    return pg.hidden_positions(tiny_gpt2, tokens), pg.attention_by_offset(tiny_gpt2, tokens)


def test_metrics_figure_has_every_metric_against_the_layer(results):
    hidden, _ = results
    fig = plot_hidden_metrics(hidden)
    assert len(fig.data) == len(METRIC_NAMES)
    by_name = {trace.name: trace for trace in fig.data}
    np.testing.assert_allclose(by_name["stable rank"].y, hidden.metric("stable_rank"))
    np.testing.assert_array_equal(by_name["positional"].x, [0, 1, 2])
    assert "token array: 6 x 40" in fig.layout.title.text
    # one legend for three panels: every colour names one metric, and the legend is grouped by panel
    colours = [trace.line.color for trace in fig.data]
    assert len(set(colours)) == len(colours)
    assert len({trace.legendgroup for trace in fig.data}) == 3


def test_trajectory_has_one_frame_and_slider_step_per_layer(results):
    hidden, _ = results
    fig = plot_hidden_trajectory(hidden)
    assert [f.name for f in fig.frames] == ["layer 0", "layer 1", "layer 2"]
    assert fig.layout.sliders[0].currentvalue.prefix == "layer: "
    assert len(fig.layout.sliders[0].steps) == 3
    first = fig.frames[0].data[0]
    assert len(first.x) == hidden.seq_len  # one point per position
    with pytest.raises(InvalidArgumentError, match="not read"):
        plot_hidden_trajectory(hidden, layers=[7])


def test_offset_heatmap_rows_are_layer_heads_and_hover_keeps_raw_values(results):
    _, att = results
    fig = plot_attention_offsets(att, max_offset=10)
    heat = fig.data[0]
    assert list(heat.y[:2]) == ["L0 H0", "L0 H1"] and len(heat.y) == 2 * 4
    np.testing.assert_array_equal(heat.x, np.arange(11))
    np.testing.assert_allclose(np.asarray(heat.customdata)[5], att.mean_logit[1, 1, :11])
    np.testing.assert_allclose(np.asarray(heat.z).mean(axis=1), 0, atol=1e-12)  # logits centred per head
    prob = plot_attention_offsets(att, value="mean_probability")
    np.testing.assert_allclose(np.asarray(prob.data[0].z)[0], att.mean_probability[0, 0])
    with pytest.raises(InvalidArgumentError, match="value must be one of"):
        plot_attention_offsets(att, value="entropy")


def test_sizes_and_ratios_sit_on_a_log_axis(results):
    """A stable rank of 1-3 beside a norm ratio of hundreds: one linear axis would flatten the first."""
    hidden, _ = results
    fig = plot_hidden_metrics(hidden)
    assert fig.layout.yaxis3.type == "log" and "log" in fig.layout.yaxis3.title.text
    ratios = [t for t in fig.data if t.yaxis == "y3"]
    assert {t.name for t in ratios} >= {"stable rank", "‖pos[0]‖ / median ‖pos[t]‖"}


def test_the_offset_colour_scale_ends_at_the_99th_percentile(results):
    _, att = results
    prob = plot_attention_offsets(att, value="mean_probability").data[0]
    assert prob.zmin == 0 and prob.zmax == pytest.approx(np.percentile(att.mean_probability, 99))
    logit = plot_attention_offsets(att).data[0]
    assert logit.zmin == pytest.approx(-logit.zmax) and logit.zmax <= np.abs(np.asarray(logit.z)).max()


def test_the_trajectory_leaves_out_an_outlying_first_position_and_says_so(results):
    hidden, _ = results
    plain = plot_hidden_trajectory(hidden, skip_first=0)
    cut = plot_hidden_trajectory(hidden, skip_first=2)
    assert (
        len(plain.frames[0].data[0].x) == hidden.seq_len
        and len(cut.frames[0].data[0].x) == hidden.seq_len - 2
    )
    assert "the first 2 left out" in cut.layout.title.text
    with pytest.raises(InvalidArgumentError, match="skip_first must be"):
        plot_hidden_trajectory(hidden, skip_first=hidden.seq_len)
