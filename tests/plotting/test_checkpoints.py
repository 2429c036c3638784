"""plot_checkpoints: one frame per checkpoint at Procrustes-aligned coordinates (scipy as oracle), slider, ranges."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from scipy.linalg import orthogonal_procrustes
from scipy.stats import ortho_group
from sklearn.decomposition import PCA

from pos_geometry.analysis.pca import pca
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.checkpoints import plot_checkpoints
from pos_geometry.plotting.export import save_figure

T = np.arange(256, dtype=np.float64)


def circular_helix(d: int = 12, seed: int = 0) -> np.ndarray:
    """A helix whose first two principal variances are exactly equal (PCA's in-plane axes are arbitrary)."""
    z = np.stack(
        [np.cos(2 * np.pi * T / 64), np.sin(2 * np.pi * T / 64), 0.5 * np.cos(2 * np.pi * T / 256)], axis=1
    )
    basis = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, 3)))[0]
    return z @ basis.T


def sweep(n_checkpoints: int = 5, d: int = 12) -> list[PositionalEmbedding]:
    """A training sweep: noise that shrinks while the helix grows, as ``checkpoint-0 … checkpoint-N``."""
    rng = np.random.default_rng(1)
    helix = circular_helix(d)
    tables = [
        a * helix + (1.2 - a) * rng.normal(size=helix.shape) for a in np.linspace(0.2, 1.0, n_checkpoints)
    ]
    return [
        PositionalEmbedding(
            torch.from_numpy(m), Provenance("toy-run", "learned", "synthetic", revision=f"checkpoint-{i}")
        )
        for i, m in enumerate(tables)
    ]


def frame_xyz(frame: go.Frame) -> np.ndarray:
    pts = frame.data[0]
    return np.stack([np.asarray(pts.x), np.asarray(pts.y), np.asarray(pts.z)], axis=1).astype(np.float64)


def test_frames_are_the_procrustes_aligned_coordinates() -> None:
    items = sweep()
    fig = plot_checkpoints(items)
    names = [f"checkpoint-{i}" for i in range(5)]
    assert [f.name for f in fig.frames] == names
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == names and [list(s.args[0]) for s in steps] == [[n] for n in names]
    assert all(s.method == "animate" for s in steps)
    assert fig.layout.sliders[0].active == 4
    play, pause = fig.layout.updatemenus[0].buttons
    assert (play.label, pause.label) == ("▶ play", "❚❚ pause")
    assert play.args[0] is None and play.args[1]["frame"]["redraw"] and not play.args[1]["fromcurrent"]
    assert list(pause.args[0]) == [None]
    # oracle: scikit-learn's PCA per checkpoint, scipy's orthogonal Procrustes onto the last basis
    fits = [PCA(3, svd_solver="full").fit(pe.matrix.numpy()) for pe in items]
    c_ref = fits[-1].components_
    for pe, fit, frame in zip(items, fits, fig.frames, strict=True):
        omega, _ = orthogonal_procrustes(fit.components_.T, c_ref.T)  # argmin ‖Cᵀ Ω − C_refᵀ‖
        expected = fit.transform(pe.matrix.numpy()) @ omega
        np.testing.assert_allclose(frame_xyz(frame), expected, atol=1e-6)
        np.testing.assert_array_equal(frame.data[0].customdata, np.arange(256))
    # the figure opens on the reference (final) checkpoint
    np.testing.assert_allclose(frame_xyz(go.Frame(data=fig.data)), frame_xyz(fig.frames[-1]))
    assert fig.layout.title.text.startswith("toy-run · checkpoint-4 · rows 0–255 · PC1–3: ")
    assert fig.layout.title.text.endswith("bases Procrustes-aligned to checkpoint-4")
    assert fig.frames[0].layout.title.text.startswith("toy-run · checkpoint-0 · ")


def test_axis_ranges_are_fixed_and_cover_every_frame() -> None:
    fig = plot_checkpoints(sweep())
    allxyz = np.concatenate([frame_xyz(f) for f in fig.frames])
    scene = fig.layout.scene
    for j, axis in enumerate((scene.xaxis, scene.yaxis, scene.zaxis)):
        lo, hi = axis.range
        assert axis.autorange is False
        assert lo < allxyz[:, j].min() and hi > allxyz[:, j].max()
        assert hi - lo < 1.2 * np.ptp(allxyz[:, j])  # tight: 5% padding each side
    widths = np.array([a.range[1] - a.range[0] for a in (scene.xaxis, scene.yaxis, scene.zaxis)])
    ratio = scene.aspectratio
    np.testing.assert_allclose([ratio.x, ratio.y, ratio.z], widths / widths.max())
    assert scene.aspectmode == "manual"
    assert all(f.layout.scene.xaxis.range is None for f in fig.frames)  # frames never move the axes


def test_bases_rotated_within_their_subspace_coincide_with_the_reference_after_alignment() -> None:
    ref = pca(circular_helix(), n_components=3)
    rng = np.random.default_rng(2)
    rotated = []
    for i in range(4):
        q = torch.from_numpy(ortho_group.rvs(3, random_state=rng))  # random orthogonal map, reflections too
        rotated.append(
            dataclasses.replace(
                ref,
                components_=q @ ref.components_,
                coordinates=ref.coordinates @ q.mT,
                provenance=dataclasses.replace(ref.provenance, revision=f"step{i}"),
            )
        )
    fig = plot_checkpoints([*rotated, ref])
    target = ref.coordinates.numpy()
    for frame in fig.frames:
        np.testing.assert_allclose(frame_xyz(frame), target, atol=1e-6)
    # without alignment they would not coincide at all
    assert all(np.abs(r.coordinates.numpy() - target).max() > 0.1 for r in rotated)
    # aligned to the first instead: every frame shows the first basis's coordinates
    first = plot_checkpoints([*rotated, ref], reference=0)
    for frame in first.frames:
        np.testing.assert_allclose(frame_xyz(frame), rotated[0].coordinates.numpy(), atol=1e-6)
    assert first.layout.sliders[0].active == 0 and "aligned to step0" in first.layout.title.text


def test_alignment_removes_axis_swaps_of_a_degenerate_helix() -> None:
    """Equal in-plane variances: each checkpoint's PCA picks its own in-plane axes; alignment undoes it."""
    rng = np.random.default_rng(3)
    tables = np.stack([circular_helix() + 1e-3 * rng.normal(size=(256, 12)) for _ in range(5)])
    raw = pca(tables, n_components=3).coordinates.numpy()
    assert np.abs(raw - raw[-1]).max() > 0.5  # the unaligned PCA frames jump
    fig = plot_checkpoints(tables)
    frames = np.stack([frame_xyz(f) for f in fig.frames])
    assert np.abs(frames - frames[-1]).max() < 0.02  # aligned: the same helix, up to the noise
    assert [s.label for s in fig.layout.sliders[0].steps] == ["0", "1", "2", "3", "4"]
    assert fig.layout.title.text.startswith("array · 4 · rows 0–255")


def test_gpt2_final_checkpoint_is_its_own_pca(gpt2_wpe: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    scales = (0.3, 0.1, 0.0)
    items = [
        PositionalEmbedding(
            torch.from_numpy(gpt2_wpe + s * rng.normal(size=gpt2_wpe.shape).astype(np.float32)),
            Provenance("gpt2", "learned", "wpe", revision=rev),
        )
        for s, rev in zip(scales, ("early", "middle", "main"), strict=True)
    ]
    fig = plot_checkpoints(items, window=(1, 1024), labels=["0%", "50%", "100%"])
    assert [f.name for f in fig.frames] == ["0%", "50%", "100%"]
    ref = PCA(3, svd_solver="full").fit(gpt2_wpe[1:].astype(np.float64))
    np.testing.assert_allclose(frame_xyz(fig.frames[-1]), ref.transform(gpt2_wpe[1:]), atol=1e-3)
    variance = 100 * ref.explained_variance_ratio_.sum()
    assert fig.layout.title.text.startswith(f"gpt2 · 100% · rows 1–1023 · PC1–3: {variance:.1f}%")
    # each frame's title reports that checkpoint's share of variance in the plotted aligned axes
    for frame, pe in zip(fig.frames, items, strict=True):
        share = (
            PCA(3, svd_solver="full")
            .fit(pe.matrix.numpy()[1:].astype(np.float64))
            .explained_variance_ratio_.sum()
        )
        assert f"PC1–3: {100 * share:.1f}%" in frame.layout.title.text


def test_labels_references_and_titles() -> None:
    items = sweep(3)
    chained = plot_checkpoints(items, reference="previous", title="my run")
    assert chained.layout.title.text == "my run" and all(
        f.layout.title.text == "my run" for f in chained.frames
    )
    assert "previous checkpoint" in plot_checkpoints(items, reference="previous").layout.title.text
    res = pca(items, n_components=3)
    from_result = plot_checkpoints(res)
    np.testing.assert_allclose(frame_xyz(from_result.frames[1]), frame_xyz(plot_checkpoints(items).frames[1]))
    same_rev = [
        dataclasses.replace(pe, provenance=dataclasses.replace(pe.provenance, revision="main"))
        for pe in items
    ]
    assert [f.name for f in plot_checkpoints(same_rev).frames] == ["main #0", "main #1", "main #2"]


def test_bad_inputs_raise_typed_errors() -> None:
    items = sweep(3)
    with pytest.raises(InvalidArgumentError, match="one entry per checkpoint \\(3\\); got 2"):
        plot_checkpoints(items, labels=["a", "b"])
    with pytest.raises(InvalidArgumentError, match="must all be different"):
        plot_checkpoints(items, labels=["a", "a", "b"])
    with pytest.raises(InvalidArgumentError, match="out of range for a batch of 3"):
        plot_checkpoints(items, reference=5)
    with pytest.raises(InvalidArgumentError, match="cannot be applied to fitted PCAResults"):
        plot_checkpoints(pca(items, n_components=3), window=(0, 100))
    with pytest.raises(InvalidArgumentError, match=r"needs 4 principal components .* hold 3"):
        plot_checkpoints(pca(items, n_components=3), components=(0, 1, 3))
    with pytest.raises(InvalidArgumentError, match="several checkpoints"):
        plot_checkpoints(circular_helix())
    with pytest.raises(InvalidArgumentError, match="share one shape"):
        plot_checkpoints([circular_helix(), circular_helix()[:100]])
    with pytest.raises(InvalidArgumentError, match="must share one shape"):
        plot_checkpoints([items[0], items[1].rows(0, 100)])
    with pytest.raises(InvalidArgumentError, match="got a list of"):
        plot_checkpoints([items[0], "checkpoint-1"])
    with pytest.raises(InvalidArgumentError, match="3 distinct"):
        plot_checkpoints(items, components=(0, 1))
    with pytest.raises(InvalidArgumentError, match="non-empty list"):
        plot_checkpoints([])


# Headless Chromium under --virtual-time-budget never fires requestAnimationFrame, on which plotly's
# animation loop waits, so the page gets a timer-based one before plotly.js loads. The action records
# the errors seen until then and moves to a checkpoint exactly as a slider step does (Plotly.animate
# with the step's frame name and options).
_RAF_SHIM = (
    "<script>window.requestAnimationFrame = function (cb) {"
    " return setTimeout(function () { cb(performance.now()); }, 16); };"
    " window.cancelAnimationFrame = function (id) { clearTimeout(id); };</script>"
)
_MOVE_TO = (
    "(function () { var gd = document.querySelector('.js-plotly-plot');"
    " var onLoad = window.__pgErrors.slice(); var step = gd.layout.sliders[0].steps[2];"
    " return Plotly.animate(gd, step.args[0], step.args[1]).then(function () {"
    " return [onLoad, gd.layout.title.text, gd._fullData[0].x[0], gd._fullData[0].z[5]]; }); })()"
)


@pytest.mark.browser
@pytest.mark.slow
def test_slider_step_shows_its_checkpoint_in_chromium(tmp_path: Path, browser_probe) -> None:
    fig = plot_checkpoints(sweep())
    out = save_figure(fig, tmp_path / "checkpoints.html")
    out.write_text(
        out.read_text(encoding="utf-8").replace("<head>", "<head>" + _RAF_SHIM, 1), encoding="utf-8"
    )
    report = browser_probe(out, action=_MOVE_TO)
    assert report["action"] is not None and not str(report["action"]).startswith("action failed"), report
    on_load, title, x0, z5 = report["action"]
    assert on_load == []  # no JavaScript error while the page loaded, rendered and began to auto-play
    # the only later error allowed: the auto-play promise (plotly's HTML template), rejected when the
    # slider step interrupts it
    assert set(report["errors"]) <= {"rejection: undefined"}
    assert report["roots"] == 1 and report["canvases"] >= 1
    assert all(f"checkpoint-{i}" in report["text"] for i in range(5))  # slider labels
    assert title == fig.frames[2].layout.title.text
    assert x0 == pytest.approx(fig.frames[2].data[0].x[0]) and z5 == pytest.approx(fig.frames[2].data[0].z[5])
    assert x0 != pytest.approx(fig.frames[4].data[0].x[0])
    shot = report["screenshot"][..., :3]
    assert len(np.unique(shot.reshape(-1, 3), axis=0)) > 100, "screenshot looks blank"
