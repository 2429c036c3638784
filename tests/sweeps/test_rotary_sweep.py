"""A sweep of a rotary training run (a tiny GPT-NeoX written by transformers, served as ``stepN`` branches by
the loopback hub, one long-wavelength plane amplified more at each step) equals per-revision
``rotary_atlas(repo, revision=...)``, reads only the q/k tensors and the headers, records bad checkpoints,
resumes without re-fetching, and gives the same table on Dask."""

from __future__ import annotations

import _pos_geometry_tests_hub_server as hub_server
import _pos_geometry_tests_rotary_run as rotary_run
import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry.cli import app
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting import plot_sweep_metrics, plot_sweep_usage
from pos_geometry.sweeps import SweepConfig, sweep
from pos_geometry.sweeps.rotary import usage_drift
from pos_geometry.sweeps.store import SweepStore

# per revision beyond its q/k/v tensors: the header's 64 KiB read-ahead window, config.json, the listing and
# HEAD answers (a few KiB)
SLACK = 72 * 1024


@pytest.fixture(scope="module")
def run(rotary_training_run):
    return rotary_training_run


@pytest.fixture(scope="module")
def baseline(run, tmp_path_factory):
    """The sweep of every served checkpoint, and the server's log of it."""
    tmp = tmp_path_factory.mktemp("rotary_baseline")
    return (*rotary_run.swept(run, tmp, "all", out=tmp / "out"), tmp)


@pytest.fixture
def hub(run, monkeypatch, tmp_path):
    hub_server.point_hub_at(monkeypatch, run.server, tmp_path)
    run.server.clear_log()
    return run


def _independent_share(qkv: np.ndarray, head: int, plane: int) -> np.ndarray:
    """The head's plane shares from the served weights, written out: s_i = ‖Q_iᵀ K_i‖_F over its planes."""
    strengths = []
    for i in range(rotary_run.ROTARY_DIM // 2):
        q = qkv[rotary_run.plane_rows(head, i, False)].astype(np.float64)
        k = qkv[rotary_run.plane_rows(head, i, True)].astype(np.float64)
        strengths.append(np.linalg.norm(q.T @ k))
    s = np.array(strengths)
    return s / s.sum()


def test_rotary_sweep_equals_the_atlas_of_each_revision(hub, baseline):
    result, _, _ = baseline
    assert result.config.kind == "rotary" and result.config.analyses == ("atlas", "drift")
    assert [r.revision for r in result.ok] == list(hub.good)
    key = f"gpt_neox.layers.{rotary_run.LAYER}.attention.query_key_value.weight"
    shares = []
    for record in result.ok:
        atlas = pg.rotary_atlas(hub.repo, revision=record.revision)
        assert record.provenance == atlas.provenance and record.commit == hub.commits[record.revision]
        stored = result.atlas(record.revision)
        for name in ("q_norm", "k_norm", "qk_share", "q_pair_cosine", "k_pair_cosine", "short_share"):
            assert torch.equal(getattr(stored, name), getattr(atlas, name)), name
        m = record.metrics
        assert m["short_share"] == pytest.approx(float(atlas.short_share.mean()), rel=1e-12)
        assert m[f"layer{rotary_run.LAYER}_short_share"] == pytest.approx(float(atlas.short_share[0].mean()))
        assert m["q_pair_cosine_abs"] == pytest.approx(float(atlas.q_pair_cosine.abs().mean()), rel=1e-12)
        assert m["k_pair_cosine_abs"] == pytest.approx(float(atlas.k_pair_cosine.abs().mean()), rel=1e-12)
        assert (m["n_layers"], m["n_heads"], m["n_planes"], m["context_length"]) == (2, 4, 4, 128)
        assert m["critical_dimension"] == 6 and m["pairing"] == "rotate_half"  # planes 0-2 cycle within 128
        assert m["helix_verdict"] == "does not apply" and "rotary" in m["helix_reason"]
        assert "top3_ratio" not in m and "helix_period" not in m  # no learned-table numbers
        # the planted head's shares, from the served file read by safetensors
        own = _independent_share(hub.weights(record.revision)[key], rotary_run.HEAD, rotary_run.PLANE)
        # the atlas reduces in float32 (its float64 oracle, tests/atlas/test_values.py, allows rtol 2e-6)
        np.testing.assert_allclose(atlas.qk_share[rotary_run.LAYER, rotary_run.HEAD].numpy(), own, rtol=1e-6)
        shares.append(own[rotary_run.PLANE])
    # the planted long-wavelength plane takes over: its share rises, the short-wavelength share falls
    assert np.all(np.diff(shares) > 0) and shares[-1] > 0.8
    short = [r.metrics["layer0_short_share"] for r in result.ok]
    assert np.all(np.diff(short) < 0)
    assert result.ok[-1].metrics["top_plane"] == rotary_run.PLANE
    # usage drift: total variation of each head's shares against the final and the previous checkpoint
    final = result.atlas(hub.good[-1]).qk_share.numpy()
    for prev, record in zip([None, *result.ok[:-1]], result.ok, strict=True):
        here = result.atlas(record.revision).qk_share.numpy()
        tv = 0.5 * np.abs(here - final).sum(-1).mean()
        assert record.metrics["usage_drift_final"] == pytest.approx(tv, abs=1e-12)
        if prev is not None:
            assert record.metrics["drift_previous_revision"] == prev.revision
    drifts = [r.metrics["usage_drift_final"] for r in result.ok]
    assert np.all(np.diff(drifts) < 0) and drifts[-1] == 0.0


def test_only_the_qk_tensors_and_headers_travel(hub, baseline):
    result, log, _ = baseline
    read = len(hub.good) + 1  # the NaN checkpoint's tensors are read; the corrupt one's header is refused
    total = sum(r.bytes_sent for r in log)  # headers and bodies, as the server wrote them
    assert total <= read * rotary_run.QKV_BYTES + len(hub.all) * SLACK, total
    file_size = (hub.folder / hub.good[0] / "model.safetensors").stat().st_size
    assert file_size > 7 * rotary_run.QKV_BYTES  # so reading any other tensor would break the bound
    ranged = [r for r in log if r.range]
    assert result.bytes_read == sum(r.body_bytes for r in ranged) and result.requests == len(ranged)
    # bounded parallel reads over keep-alive connections
    assert len({r.client_port for r in ranged}) <= 8


def test_bad_rotary_checkpoints_are_recorded_and_skipped(hub, baseline):
    result, _, tmp = baseline
    corrupt, nan = result[hub.corrupt], result[hub.nonfinite]
    assert (corrupt.status, nan.status) == ("corrupt", "non-finite")
    assert "header" in corrupt.reason and "NaN" in nan.reason and "layer 1" in nan.reason
    assert not corrupt.metrics and not nan.metrics
    frame = pd.read_csv(tmp / "out" / "metrics.csv").set_index("revision")
    assert frame.loc[hub.nonfinite, "status"] == "non-finite" and np.isnan(
        frame.loc[hub.nonfinite, "short_share"]
    )
    assert frame.loc[hub.good[-1], "helix_verdict"] == "does not apply"
    # nothing of what the atlas streamed through the tensor cache is left behind (keep_tables=False); the
    # derived attention layout (the architecture's description, no weights) is kept
    cache = tmp / "pos_geometry_cache"
    assert not [p for p in cache.rglob("*") if p.is_file() and "layouts" not in p.parts]


def test_rotary_sweep_resumes_and_keeps_tables_on_request(hub, baseline, tmp_path):
    out = tmp_path / "run"
    first = sweep(hub.repo, list(hub.good[:2]), store=out)
    assert first.n_computed == 2
    hub.server.clear_log()
    again = sweep(hub.repo, "all", store=out)
    assert again.n_resumed == 2 and again.n_computed == len(hub.all) - 2
    fetched = {r.path for r in hub.server.requests() if r.range}
    for revision in hub.good[:2]:  # nothing of a finished checkpoint is asked for again
        assert not any(hub.commits[revision] in path for path in fetched)
    cols = ["resumed", "bytes_read", "requests"]
    pd.testing.assert_frame_equal(
        again.to_frame().drop(columns=cols), baseline[0].to_frame().drop(columns=cols)
    )
    # another layer choice is another config: recomputed, not resumed
    layer1 = sweep(hub.repo, [hub.good[-1]], store=out, layers=[1], keep_tables=True)
    assert layer1.n_resumed == 0 and layer1.ok[0].metrics["n_layers"] == 1
    # keep_tables: rotary_atlas then reads that checkpoint from the cache, without any request
    hub.server.clear_log()
    atlas = pg.rotary_atlas(hub.repo, revision=hub.commits[hub.good[-1]], layers=[1])
    assert not [r for r in hub.server.requests() if r.range]
    assert torch.equal(atlas.qk_share, layer1.atlas(hub.good[-1]).qk_share)


def test_rotary_sweep_on_dask_is_identical(hub, baseline, tmp_path, dask_client):
    result = sweep(hub.repo, "all", executor=dask_client[1], store=tmp_path / "dask")
    assert result.executor.startswith("dask")
    pd.testing.assert_frame_equal(result.to_frame(), baseline[0].to_frame())


def test_rotary_sweep_command_and_figure(hub, tmp_path):
    out = tmp_path / "cli"
    res = CliRunner().invoke(
        app, ["sweep", hub.repo, "--revisions", "step0,step64,step512", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "short-wavelength share" in res.stdout and "3/3 checkpoints ok" in res.stdout
    assert (
        (out / "metrics.html").is_file()
        and (out / "usage.html").is_file()
        and not (out / "helix.html").exists()
    )
    frame = pd.read_parquet(out / "metrics.parquet")
    fig = plot_sweep_metrics(pg.sweep(hub.repo, ["step0", "step64", "step512"], store=out / "checkpoints"))
    panel = next(t for t in fig.data if t.yaxis == "y")  # the first panel: short_share against step + 1
    assert list(panel.x) == [1, 65, 513] and fig.layout.xaxis.type == "log"
    np.testing.assert_allclose(panel.y, frame["short_share"].to_numpy())


def test_plane_usage_figure_is_the_stored_shares(hub, baseline):
    result, _, _ = baseline
    fig = plot_sweep_usage(result)
    (heat,) = fig.data
    assert list(heat.x) == [s + 1 for s in rotary_run.STEPS] and fig.layout.xaxis.type == "log"
    for j, revision in enumerate(hub.good):  # column j: each plane's share, averaged over layers and heads
        shares = SweepStore(result.store).arrays(revision)["qk_share"]
        np.testing.assert_allclose(np.asarray(heat.z)[:, j], shares.mean(axis=(0, 1)), rtol=1e-12)
    row = np.asarray(plot_sweep_usage(result, layer=0).data[0].z)[rotary_run.PLANE]
    assert np.all(np.diff(row) > 0)  # the planted plane gains in layer 0
    assert heat.y[rotary_run.PLANE].endswith("λ=198.7") and heat.y[0].endswith(
        "*"
    )  # long plane: no cycle in 128


def test_rotary_config_rules():
    config = SweepConfig.make("all", kind="rotary")
    assert config.analyses == ("atlas", "drift") == SweepConfig.make("cheap", kind="rotary").analyses
    assert SweepConfig.make(["drift"], kind="rotary").analyses == ("atlas", "drift")
    # the learned parameters do not decide a rotary result: same fingerprint; layers and fold_norm do
    assert (
        config.fingerprint()
        == SweepConfig.make("all", kind="rotary", n_surrogates=9, alpha=0.1).fingerprint()
    )
    assert config.fingerprint() != SweepConfig.make("all", kind="rotary", layers=[0]).fingerprint()
    assert config.fingerprint() != SweepConfig.make("all", kind="rotary", fold_norm=True).fingerprint()
    with pytest.raises(InvalidArgumentError, match="rotary model's"):
        SweepConfig.make(["helix"], kind="rotary")
    with pytest.raises(InvalidArgumentError, match="'atlas' is a rotary model's"):
        SweepConfig.make(["atlas"])
    with pytest.raises(InvalidArgumentError, match="learned positional table"):
        SweepConfig.make("all", layers=[0])
    with pytest.raises(InvalidArgumentError, match="layers must be"):
        SweepConfig.make("all", kind="rotary", layers=["0"])


def test_usage_drift_is_total_variation():
    p = np.array([[[0.7, 0.1, 0.1, 0.1]], [[0.25, 0.25, 0.25, 0.25]]])
    q = np.array([[[0.1, 0.1, 0.1, 0.7]], [[0.25, 0.25, 0.25, 0.25]]])
    assert usage_drift(p, q) == pytest.approx((0.6 + 0.0) / 2)  # ½Σ|p−q| per head, then the mean
    assert usage_drift(p, p) == 0.0 and usage_drift(p, q[:1]) is None


def test_store_of_a_rotary_sweep_holds_the_atlas(hub, baseline):
    result, _, _ = baseline
    arrays = SweepStore(result.store).arrays(hub.good[0])
    assert arrays["qk_share"].shape == (2, 4, 4) and list(arrays["critical"]) == [1, 1, 1, 0]
    with pytest.raises(InvalidArgumentError, match="rotary model has no table"):
        result.pca()
    with pytest.raises(InvalidArgumentError, match="no atlas"):
        result.atlas(hub.corrupt)
