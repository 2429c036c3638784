"""``plot_intervention_sweep``: a family swept over its parameter is a line against the parameter; edits that stand
alone (the card's defaults) are categories, so no line suggests a dose-response between unrelated edits."""

from __future__ import annotations

import numpy as np

from pos_geometry import Intervention, InterventionSweep, Provenance
from pos_geometry.plotting import plot_intervention_sweep

PROV = Provenance("toy-llama", "hidden", "synthetic")


def _one(label: str, parameter, delta: float, low: float, high: float) -> Intervention:
    base = np.linspace(5.0, 3.0, 9)
    return Intervention(
        edit=label, parameter=parameter, base_loss=4.0, edited_loss=4.0 + delta, delta=delta,
        delta_interval=(low, high), confidence=0.95, n_bootstrap=10, sequence_delta=np.full(3, delta),
        base_loss_by_position=base, edited_loss_by_position=base + delta, n_sequences=3, seq_len=10, corpus="toy",
        provenance=PROV,
    )  # fmt: skip


def test_unrelated_edits_are_categories_coloured_by_their_interval():
    results = (
        _one("table replaced by its mean row", None, 0.5, 0.3, 0.7),
        _one("the 4 fastest rotation planes removed", 4.0, 0.01, -0.02, 0.04),
        _one("the 8 slowest rotation planes removed", 8.0, -0.2, -0.3, -0.1),
    )
    fig = plot_intervention_sweep(InterventionSweep(results=results, base_loss=4.0, provenance=PROV))
    (trace,) = fig.data
    assert fig.layout.xaxis.type == "category" and list(trace.x) == [r.edit for r in results]
    assert trace.mode == "markers" and list(trace.marker.color) == ["#d62728", "#7f7f7f", "#1f77b4"]
    np.testing.assert_allclose(trace.error_y.array, [0.2, 0.03, 0.1], atol=1e-12)


def test_a_family_swept_over_its_parameter_is_a_line():
    results = tuple(
        _one(f"the {n} slowest rotation planes removed", float(n), 0.1 * n, 0.0, 0.2 * n) for n in (1, 4)
    )
    fig = plot_intervention_sweep(InterventionSweep(results=results, base_loss=4.0, provenance=PROV))
    (trace,) = fig.data
    assert (
        list(trace.x) == [1.0, 4.0] and trace.mode == "lines+markers" and fig.layout.xaxis.type != "category"
    )
