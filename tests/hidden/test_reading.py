"""What each layer's positional share says beside its floor: the CLI's per-layer line and the card's sentence."""

from __future__ import annotations

from pos_geometry.hidden.reading import layer_line, layer_state, residual_reading


def _row(share, floor, late, late_floor, ratio, layer=3):
    return {
        "layer": layer, "positional_share": share, "positional_floor": floor, "positional_share_late": late,
        "positional_floor_late": late_floor, "position0_norm_ratio": ratio, "top_k_ratio": 0.9,
        "stable_rank": 1.5, "smoothness": 0.8, "max_cosine": 0.1,
    }  # fmt: skip


def test_each_layer_line_sets_the_share_beside_its_floor_and_flags_what_it_means():
    real = layer_line(_row(0.60, 0.02, 0.55, 0.02, 1.2), 3, 2)
    assert "positional share 0.600 (floor 0.020); without the first 2 positions 0.550 (floor 0.020)" in real
    assert "[" not in real  # nothing to flag
    noise = layer_line(_row(0.125, 0.123, 0.13, 0.12, 1.0), 3, 2)
    assert "under 2x its sampling floor: at the floor" in noise
    first = layer_line(_row(0.99, 0.12, 0.13, 0.121, 124.0), 3, 2)
    assert "without the first 2 positions at its floor: they carry the share" in first
    assert "position 0's norm 124x the median" in first


def test_the_floor_rule_is_twice_the_floor_on_both_sides():
    assert layer_state(_row(0.0399, 0.02, 0.5, 0.02, 1.0)) == "at its floor"
    assert layer_state(_row(0.0401, 0.02, 0.5, 0.02, 1.0)) == "above its floor"
    assert layer_state(_row(0.5, 0.02, 0.0399, 0.02, 1.0)) == "first positions only"


def test_the_sentence_names_the_layers_of_each_state_and_where_position_fades_out():
    rows = [
        _row(0.6, 0.02, 0.5, 0.02, 1.0, 0), _row(0.5, 0.02, 0.4, 0.02, 1.0, 1),
        _row(0.9, 0.02, 0.03, 0.02, 40.0, 2), _row(0.03, 0.02, 0.03, 0.02, 1.0, 3),
        _row(0.03, 0.02, 0.03, 0.02, 1.0, 4),
    ]  # fmt: skip
    reading = residual_reading(rows, 2)
    assert reading["above_its_floor"] == [0, 1] and reading["first_positions_only"] == [2]
    assert reading["floor_from"] == 3 and reading["outliers"] == [2]
    assert reading["sentence"] == (
        "position stands above its sampling floor in layers 0-1; only through the first 2 positions in layer 2; "
        "it is at its floor from layer 3 on; position 0 is an outlier (norm ≥ 10× the median) in layer 2 (rule: a "
        "layer is at its floor when its positional share is under 2× the share its number of contexts gives with "
        "no positional signal; a description, not a test)"
    )
    back = residual_reading([*rows, _row(0.6, 0.02, 0.5, 0.02, 1.0, 5)], 2)  # position returns at layer 5
    assert back["floor_from"] is None and "at its floor in layers 3-4" in back["sentence"]
