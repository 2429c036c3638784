"""What each layer's positional share says, beside its sampling floor: the words the CLI prints per layer and
the card's verdict on the residual stream.

A layer's positional share is **at its floor** when it is under twice the share that its number of contexts
gives with no positional signal at all (:mod:`~pos_geometry.hidden.metrics`); it is **carried by the first
positions** when the share is above its floor but falls to its floor once the first ``skip_first`` positions
are left out (massive activations at the first token, attention sinks); position 0 is an **outlier** when its
positional vector's norm is :data:`OUTLIER_NORM` times the median position's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FLOOR_FACTOR", "OUTLIER_NORM", "LAYER_STATES", "layer_line", "layer_state", "residual_reading"]

OUTLIER_NORM = 10.0
"""Position 0 is flagged when its positional vector's norm is this many times the median position's."""

FLOOR_FACTOR = 2.0
"""A share under this many times its sampling floor is counted as at the floor."""

LAYER_STATES = ("above its floor", "first positions only", "at its floor")
"""What :func:`layer_state` can say of one layer."""


def layer_state(row: Mapping[str, Any]) -> str:
    """One of :data:`LAYER_STATES` for a metrics row (:meth:`~pos_geometry.HiddenPositions.metrics_rows`)."""
    if row["positional_share"] < FLOOR_FACTOR * row["positional_floor"]:
        return "at its floor"
    if row["positional_share_late"] < FLOOR_FACTOR * row["positional_floor_late"]:
        return "first positions only"
    return "above its floor"


def layer_line(row: Mapping[str, Any], n_components: int, skip_first: int) -> str:
    """One layer's summary: its positional share beside its sampling floor, the share without the first
    ``skip_first`` positions beside its own floor, and what the two say (at the floor: sampling noise; carried by
    the first positions alone; position 0 an outlier), then the geometry of the positional part."""
    share, floor = row["positional_share"], row["positional_floor"]
    late, late_floor = row["positional_share_late"], row["positional_floor_late"]
    state = layer_state(row)
    flags = []
    if state == "at its floor":
        flags.append(f"under {FLOOR_FACTOR:g}x its sampling floor: at the floor")
    elif state == "first positions only":
        flags.append(f"without the first {skip_first} positions at its floor: they carry the share")
    if row["position0_norm_ratio"] >= OUTLIER_NORM:
        flags.append(f"position 0's norm {row['position0_norm_ratio']:.0f}x the median")
    return (
        f"layer {row['layer']:>3}: positional share {share:.3f} (floor {floor:.3f}); without the first {skip_first} "
        f"positions {late:.3f} (floor {late_floor:.3f})"
        + (f" [{'; '.join(flags)}]" if flags else "")
        + f"; top-{n_components} {row['top_k_ratio']:.3f}, stable rank {row['stable_rank']:.2f}, smoothness "
        f"{row['smoothness']:.3f}, max cos pos/ctx {row['max_cosine']:.3f}"
    )


def _ranges(layers: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    parts: list[str] = []
    for layer in layers:
        if parts and layer == int(parts[-1].split("-")[-1]) + 1:
            parts[-1] = parts[-1].split("-")[0] + f"-{layer}"
        else:
            parts.append(str(layer))
    return ", ".join(parts) or "none"


def _layers(layers: Sequence[int]) -> str:
    """``"layer 2"`` or ``"layers 0-2, 5"``."""
    return f"layer {layers[0]}" if len(layers) == 1 else f"layers {_ranges(layers)}"


def residual_reading(rows: Sequence[Mapping[str, Any]], skip_first: int) -> dict[str, Any]:
    """The residual stream in words: which layers hold position above their floor, which only through the
    first positions, which are at the floor, from which layer on position stays at its floor, and which
    layers have a first-position outlier. Returns ``{"sentence", "states", "floor_from", "outliers", ...}``."""
    states = {int(r["layer"]): layer_state(r) for r in rows}
    by_state = {s: [layer for layer, v in states.items() if v == s] for s in LAYER_STATES}
    layers = sorted(states)
    floor_from = None
    for layer in reversed(layers):
        if states[layer] != "at its floor":
            break
        floor_from = layer
    outliers = [int(r["layer"]) for r in rows if r["position0_norm_ratio"] >= OUTLIER_NORM]
    parts = []
    if by_state["above its floor"]:
        parts.append(f"position stands above its sampling floor in {_layers(by_state['above its floor'])}")
    if by_state["first positions only"]:
        parts.append(
            f"only through the first {skip_first} positions in {_layers(by_state['first positions only'])}"
        )
    if floor_from is not None and floor_from != layers[0]:
        parts.append(f"it is at its floor from layer {floor_from} on")
    elif by_state["at its floor"]:
        parts.append(f"at its floor in {_layers(by_state['at its floor'])}")
    if outliers:
        parts.append(f"position 0 is an outlier (norm ≥ {OUTLIER_NORM:g}× the median) in {_layers(outliers)}")
    parts.append(
        f"(rule: a layer is at its floor when its positional share is under {FLOOR_FACTOR:g}× the share its number of "
        "contexts gives with no positional signal; a description, not a test)"
    )
    return {
        "sentence": "; ".join(parts[:-1]) + " " + parts[-1],
        "states": states,
        "floor_from": floor_from,
        "outliers": outliers,
        **{s.replace(" ", "_"): v for s, v in by_state.items()},
    }
