"""plot_helix_grid: one scene per model, equal linked cameras (and a working sync script in HTML)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from pos_geometry.analysis.pca import pca
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.export import LINKED_SCENES_META, STATIC_SIZE_META, save_figure
from pos_geometry.plotting.grid import ROW_HEIGHT, SCENE_WIDTH, plot_helix_grid


def _helix(period: float, seed: int, n: int = 200, d: int = 10) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    z = np.stack([np.cos(2 * np.pi * t / period), np.sin(2 * np.pi * t / period), 0.01 * t], 1)
    return (z @ np.linalg.qr(rng.normal(size=(d, 3)))[0].T + 0.05 * rng.normal(size=(n, d))).astype(
        np.float32
    )


def _models(count: int = 4) -> list[PositionalEmbedding]:
    return [
        PositionalEmbedding(
            torch.from_numpy(_helix(40 + 10 * i, i)),
            Provenance(f"toy-{i}", "learned", "synthetic", revision="main"),
        )
        for i in range(count)
    ]


def _scene_names(fig) -> list[str]:
    return sorted(
        (k for k in fig.layout.to_plotly_json() if k.startswith("scene")), key=lambda s: int(s[5:] or 1)
    )


def test_linked_grid_has_one_scene_per_model_and_equal_cameras() -> None:
    models = _models(4)
    fig = plot_helix_grid(models, cols=3)
    scenes = _scene_names(fig)
    assert scenes == ["scene", "scene2", "scene3", "scene4"]
    cams = [fig.layout[s].camera.to_plotly_json() for s in scenes]
    assert all(c == cams[0] for c in cams) and cams[0]["eye"]
    assert fig.layout.meta[LINKED_SCENES_META] == scenes
    # every model's points live in its own scene; one shared position colour axis
    point_traces = [t for t in fig.data if t.name == "positions"]
    assert [t.scene for t in point_traces] == scenes
    assert all(t.marker.coloraxis == "coloraxis" for t in point_traces)
    assert fig.layout.coloraxis.colorbar.title.text == "position"
    # 2 rows x 3 cols: scenes 1-3 on the top row
    assert fig.layout.scene.domain.y == fig.layout.scene3.domain.y != fig.layout.scene4.domain.y
    # subplot titles carry each model's variance of the plotted components (scikit-learn oracle)
    titles = [a.text for a in fig.layout.annotations]
    for m, title in zip(models, titles, strict=True):
        ratio = PCA(3).fit(m.numpy().astype(np.float64)).explained_variance_ratio_.sum()
        assert title == f"{m.provenance.model_id} @ main · rows 0–199 · PC1–3: {100 * ratio:.1f}%"


def test_independent_cameras_and_custom_titles() -> None:
    fig = plot_helix_grid(_models(2), link_cameras=False, titles=["first", "second"], line=False)
    assert LINKED_SCENES_META not in fig.layout.meta
    assert fig.layout.scene.camera.eye.x is None and fig.layout.scene2.camera.eye.x is None
    assert [a.text for a in fig.layout.annotations] == ["first", "second"]
    assert len(fig.data) == 2


def test_batched_pca_result_and_mixed_shapes(gpt2_wpe: np.ndarray, gpt1_positions: np.ndarray) -> None:
    batched = pca([m for m in _models(3)], n_components=3)
    fig = plot_helix_grid(batched, cols=2)
    assert _scene_names(fig) == ["scene", "scene2", "scene3"]
    # real tables of different lengths side by side
    real = [
        PositionalEmbedding(
            torch.from_numpy(gpt2_wpe), Provenance("gpt2", "learned", "wpe", revision="main")
        ),
        PositionalEmbedding(
            torch.from_numpy(gpt1_positions), Provenance("openai-gpt", "learned", "positions_embed")
        ),
    ]
    fig = plot_helix_grid(real, window=(1, None))
    titles = [a.text for a in fig.layout.annotations]
    assert titles[0].startswith("gpt2 @ main · rows 1–1023 · PC1–3: ")
    assert titles[1].startswith("openai-gpt · rows 1–511 · PC1–3: ")
    assert [len(t.x) for t in fig.data if t.name == "positions"] == [1023, 511]


def test_rows_get_their_height_and_static_exports_their_width() -> None:
    one_row, three_rows = plot_helix_grid(_models(2), cols=3), plot_helix_grid(_models(9), cols=3)
    assert three_rows.layout.height - one_row.layout.height == 2 * ROW_HEIGHT
    # 9 models in 3 columns: a PNG gives every scene at least SCENE_WIDTH pixels
    width, height = three_rows.layout.meta[STATIC_SIZE_META]
    assert width >= 3 * SCENE_WIDTH and height is None  # the height is the layout's
    # two scenes on one row: the scene domains split the width
    assert one_row.layout.scene.domain.x[1] <= one_row.layout.scene2.domain.x[0]


def test_bad_arguments() -> None:
    with pytest.raises(InvalidArgumentError, match="one entry per item"):
        plot_helix_grid(_models(2), titles=["only one"])
    with pytest.raises(InvalidArgumentError, match="cols must be a positive integer"):
        plot_helix_grid(_models(2), cols=0)
    with pytest.raises(InvalidArgumentError, match="non-empty list"):
        plot_helix_grid([])


# Rotate scene 1 the way a drag does (a relayout of scene.camera), then read every scene's camera.
_ROTATE = """(function () {
  var gd = document.querySelector('.js-plotly-plot');
  var cam = {eye: {x: 2.2, y: -0.4, z: 0.5}, up: {x: 0, y: 0, z: 1}, center: {x: 0, y: 0, z: 0}};
  return Plotly.relayout(gd, {'scene.camera': cam})
    .then(function () { return new Promise(function (r) { setTimeout(r, 500); }); })
    .then(function () { return ['scene', 'scene2'].map(function (s) {
      var c = gd.layout[s].camera; return c ? c.eye : null; }); });
})()"""


@pytest.mark.browser
@pytest.mark.slow
def test_linked_cameras_move_together_in_chromium(tmp_path: Path, browser_probe) -> None:
    linked = save_figure(plot_helix_grid(_models(2)), tmp_path / "linked.html")
    report = browser_probe(linked, action=_ROTATE, width=900, height=450, screenshot=False)
    assert report["errors"] == []
    assert report["roots"] == 1 and report["canvases"] >= 1
    assert report["action"] == [{"x": 2.2, "y": -0.4, "z": 0.5}] * 2
    # control: without the link the second scene keeps its own camera
    independent = save_figure(plot_helix_grid(_models(2), link_cameras=False), tmp_path / "independent.html")
    eyes = browser_probe(independent, action=_ROTATE, width=900, height=450, screenshot=False)["action"]
    assert eyes[0] == {"x": 2.2, "y": -0.4, "z": 0.5} and eyes[1] != eyes[0]
