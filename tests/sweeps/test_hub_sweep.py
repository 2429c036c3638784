"""A sweep of the synthetic training run over the loopback hub equals per-revision ``load`` + analyses,
reads little more than the tensors, records bad checkpoints, and resumes without re-fetching."""

from __future__ import annotations

import math

import _pos_geometry_tests_rotary_run as rotary_run  # swept()
import numpy as np
import pandas as pd
import pytest
import scipy.linalg

import pos_geometry as pg
from pos_geometry.errors import CheckpointFormatError, NonFiniteError
from pos_geometry.sweeps import sweep
from pos_geometry.sweeps.store import SweepStore

TABLE_BYTES = 1024 * 768 * 4
MISSING = "checkpoint-999999"


@pytest.fixture(scope="module")
def baseline(training_run, tmp_path_factory):
    """The cheap sweep of every served checkpoint plus one that does not exist, and the server's log of it."""
    tmp = tmp_path_factory.mktemp("baseline")
    result, log = rotary_run.swept(
        training_run, tmp, [*training_run.all, MISSING], analyses="cheap", out=tmp / "out"
    )
    return result, log, tmp / "out"


def _independent_drift(a: np.ndarray, b: np.ndarray) -> float:
    """sqrt(1 - mean cos θ) over the principal angles between the row spaces of a and b."""
    angles = scipy.linalg.subspace_angles(a.T.astype(np.float64), b.T.astype(np.float64))
    return math.sqrt(max(0.0, 1 - np.cos(angles).mean()))


def test_sweep_equals_load_and_analyses(hub, baseline):
    result, _, _ = baseline
    assert result.revisions == (*hub.all, MISSING)
    fits = {}
    for record in result.ok:
        emb = pg.load(hub.repo, revision=record.revision)
        x = emb.matrix.double().numpy()
        fit = pg.pca(emb, n_components=10)
        fits[record.revision] = fit
        m = record.metrics
        assert record.commit == hub.commits[record.revision] == emb.provenance.commit
        assert record.provenance == emb.provenance
        assert m["top3_ratio"] == float(fit.explained_variance_ratio_[:3].sum())
        assert m["top10_ratio"] == float(fit.explained_variance_ratio_.sum())
        assert m["table_norm"] == pytest.approx(np.sqrt((x**2).sum()), rel=1e-12)
        assert m["position0_norm"] == pytest.approx(np.sqrt((x[0] ** 2).sum()), rel=1e-12)
        assert (m["n_positions"], m["d_model"]) == (1024, 768)
    ok = [r.revision for r in result.ok]
    assert ok == list(hub.good)
    final = fits[ok[-1]].components_[:3].numpy()
    for prev, cur in zip([None, *ok[:-1]], ok, strict=True):
        m = result[cur].metrics
        comps = fits[cur].components_[:3].numpy()
        assert m["drift_final"] == pytest.approx(_independent_drift(comps, final), abs=1e-6)
        assert m["drift_final_revision"] == ok[-1]
        if prev is None:
            assert m["drift_previous"] is None
        else:
            assert m["drift_previous_revision"] == prev
            assert m["drift_previous"] == pytest.approx(
                _independent_drift(comps, fits[prev].components_[:3].numpy()), abs=1e-6
            )
    # the helix forms: the top-3 share rises from noise level to GPT-2's 0.90, the basis settles on the final one
    first, last = result[ok[0]].metrics, result[ok[-1]].metrics
    assert first["top3_ratio"] < 0.05 and last["top3_ratio"] > 0.85
    assert first["drift_final"] > 0.9 and last["drift_final"] == pytest.approx(0.0, abs=1e-6)


def test_bad_checkpoints_are_recorded_and_skipped(hub, baseline):
    result, _, out = baseline
    corrupt, nan, missing = result[hub.corrupt], result[hub.nonfinite], result[MISSING]
    assert (corrupt.status, nan.status, missing.status) == ("corrupt", "non-finite", "missing")
    assert "header" in corrupt.reason and "NaN" in nan.reason and MISSING in missing.reason
    assert not corrupt.metrics and not nan.metrics and missing.commit is None
    # load says the same about them
    with pytest.raises(CheckpointFormatError):
        pg.load(hub.repo, revision=hub.corrupt)
    with pytest.raises(NonFiniteError):
        pg.load(hub.repo, revision=hub.nonfinite)
    # pinned-commit failures are stored (not retried); a missing revision is not
    store = SweepStore(out / "checkpoints")
    fp = result.config.fingerprint()
    assert store.get(hub.corrupt, fp).status == "corrupt"
    assert store.get(MISSING, fp) is None
    # the table says why, row by row
    frame = pd.read_csv(out / "metrics.csv")
    row = frame.set_index("revision").loc[hub.nonfinite]
    assert row["status"] == "non-finite" and "NaN" in row["reason"] and np.isnan(row["top3_ratio"])


def test_bytes_and_requests(hub, baseline):
    result, log, _ = baseline
    n = len(result.revisions)
    total = sum(r.bytes_sent for r in log)  # headers and bodies, as the server wrote them
    n_tables = len(hub.good) + 1  # the NaN table is read; the corrupt file's header is refused first
    assert total <= n_tables * TABLE_BYTES + n * 64 * 1024
    ranged = [r for r in log if r.range]
    assert len(ranged) == 2 * (n_tables) + 1  # header + tensor per table; the corrupt one: its header only
    assert result.requests == len(ranged)
    assert result.bytes_read == sum(r.body_bytes for r in ranged)
    # no per-revision listing or HEAD: the branches came in one request
    assert sum("/refs" in r.path for r in log) == 1
    assert not any(r.method == "HEAD" and "model.safetensors" in r.path for r in log)
    # bounded parallel reads over keep-alive connections: at most 8 connections for all range requests
    assert len({r.client_port for r in ranged}) <= 8


def test_interrupted_sweep_resumes_without_refetching(hub, baseline, monkeypatch, tmp_path):
    out = tmp_path / "run"
    calls = {"n": 0}
    real_put = SweepStore.put

    def put_then_interrupt(self, outcome, fingerprint):
        calls["n"] += 1
        if calls["n"] == 15:
            raise KeyboardInterrupt  # Ctrl-C while the sweep is running
        return real_put(self, outcome, fingerprint)

    monkeypatch.setattr(SweepStore, "put", put_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        sweep(hub.repo, "all", analyses="cheap", out=out)
    monkeypatch.setattr(SweepStore, "put", real_put)
    files = sorted((out / "checkpoints").iterdir())
    assert len(files) == 14 and all(f.suffix == ".safetensors" for f in files)  # no temporary left over
    assert not (out / "metrics.csv").exists()
    stored = [r for r in hub.all if SweepStore(out / "checkpoints").path(r).exists()]

    hub.server.clear_log()
    result = sweep(hub.repo, "all", analyses="cheap", out=out)
    fetched = {r.path for r in hub.server.requests() if r.range}
    for revision in stored:  # nothing of a finished checkpoint is asked for again
        assert not any(hub.commits[revision] in path for path in fetched)
        assert result[revision].resumed and result[revision].bytes_read == 0
    assert result.n_resumed == 14 and result.n_computed == len(hub.all) - 14
    base = baseline[0].to_frame().iloc[:-1].drop(columns=["resumed", "bytes_read", "requests"])
    pd.testing.assert_frame_equal(result.to_frame().drop(columns=["resumed", "bytes_read", "requests"]), base)

    hub.server.clear_log()
    again = sweep(hub.repo, "all", analyses="cheap", out=out)
    assert again.n_computed == 0 and not any(r.range for r in hub.server.requests())


@pytest.mark.slow
def test_dask_local_cluster_gives_identical_results(hub, baseline, tmp_path, dask_client):
    cluster, client = dask_client
    result = sweep(hub.repo, [*hub.all, MISSING], analyses="cheap", executor=client, out=tmp_path / "dask")
    by_address = sweep(hub.repo, list(hub.good[-3:]), analyses="cheap", executor=cluster.scheduler_address,
                       store=tmp_path / "addr")  # fmt: skip
    assert result.executor.startswith("dask")
    pd.testing.assert_frame_equal(result.to_frame(), baseline[0].to_frame())
    for revision in hub.good[-3:]:
        assert by_address[revision].metrics["top3_ratio"] == baseline[0][revision].metrics["top3_ratio"]


@pytest.mark.slow
def test_full_metrics_match_the_analyses(hub):
    """The helix and periodicity verdicts (with their nulls) equal fit_helix/periodicity on the loaded tables."""
    early, final = hub.good[0], hub.good[-1]
    result = sweep(hub.repo, [early, final], n_surrogates=9, alpha=0.1)
    for revision in (early, final):
        emb = pg.load(hub.repo, revision=revision)
        helix = pg.fit_helix(emb, 3, n_surrogates=9, alpha=0.1)
        per = pg.periodicity(emb, n_components=3, n_surrogates=9, alpha=0.1)
        m = result[revision].metrics
        assert (m["helix_verdict"], m["helix_reason"], m["helix_p_value"]) == (
            helix.verdict,
            helix.reason,
            helix.p_value,
        )
        assert m["helix_period"] == helix.period and m["helix_rotation_share"] == helix.rotation_share
        assert m["toeplitz_score"] == per.toeplitz_score and m["column_fraction"] == per.column_fraction
        top = per.dominant_periods[0] if per.dominant_periods else None
        assert m["periodicity_period"] == (top.period if top else None)
        assert m["periodicity_n_significant"] == len(per.dominant_periods)
    assert result[final].metrics["helix_verdict"] == "helix"  # GPT-2's table, as in the README
    assert result[early].metrics["helix_verdict"] in ("does not apply", "not a helix")  # the random init
    assert result[early].metrics["helix_period"] is None or result[early].metrics["helix_verdict"] != "helix"
    assert result[final].metrics["helix_turns"] == pytest.approx(1.83, abs=0.05)
