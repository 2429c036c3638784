"""plot_sweep_metrics (log-step panels, overlays) and plot_sweep_helix (stored fits == fresh PCA of the tables)."""

from __future__ import annotations

import numpy as np
import pytest

from pos_geometry import PositionalEmbedding, Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting import plot_checkpoints, plot_sweep_helix, plot_sweep_metrics
from pos_geometry.sweeps.metrics import SweepConfig, analyse
from pos_geometry.sweeps.record import CheckpointRecord, Outcome
from pos_geometry.sweeps.result import SweepResult
from pos_geometry.sweeps.store import SweepStore

STEPS = (0, 10, 100, 1000)


def helix_run(tmp_path, seed: int, name: str):
    """Tables of a helix (period 40) in 16 dims, noise shrinking with the step; one record failed (step 100)."""
    rng = np.random.default_rng(seed)
    t = np.arange(160.0)
    z = np.stack([np.cos(2 * np.pi * t / 40), np.sin(2 * np.pi * t / 40), t / 80], axis=1)
    helix = z @ np.linalg.qr(rng.normal(size=(16, 3)))[0].T
    config = SweepConfig.make("cheap", n_components=5)
    store = SweepStore(tmp_path / name)
    records, tables = [], []
    for step in STEPS:
        prov = Provenance(name, "learned", "synthetic", revision=f"checkpoint-{step}")
        if step == 100:
            records.append(CheckpointRecord(prov.revision, step, "corrupt", "CheckpointFormatError: test"))
            continue
        emb = PositionalEmbedding(
            (helix + rng.normal(size=helix.shape) / (1 + step)).astype(np.float32), prov
        )
        metrics, arrays = analyse(emb, config)
        record = CheckpointRecord(prov.revision, step, "ok", metrics=metrics, provenance=prov)
        store.put(Outcome(record, arrays), config.fingerprint())
        records.append(record)
        tables.append(emb)
    result = SweepResult(
        model=name, repo_id=f"toy/{name}", revisions=tuple(r.revision for r in records), records=tuple(records),
        config=config, executor="none", store=str(store.root), bytes_read=0, requests=0, n_computed=4, n_resumed=0,
    )  # fmt: skip
    return result, tables


def test_metrics_panels_on_a_log_step_axis_with_overlays(tmp_path):
    a, _ = helix_run(tmp_path, 0, "seed-a")
    b, _ = helix_run(tmp_path, 1, "seed-b")
    fig = plot_sweep_metrics([a, b], ["top3_ratio", "position0_norm"])
    assert len(fig.data) == 4  # 2 sweeps x 2 panels
    assert all(fig.layout[f"xaxis{i}"].type == "log" for i in ("", "2"))
    first = fig.data[0]
    ok = [r for r in a.records if r.ok]
    assert list(first.x) == [r.step + 1 for r in ok]  # step 0 is drawn at 1; the failed step 100 is left out
    assert np.allclose(first.y, [r.metrics["top3_ratio"] for r in ok])
    assert first.line.color == fig.data[1].line.color != fig.data[2].line.color  # one colour per sweep
    assert [d.showlegend for d in fig.data] == [True, False, True, False]
    with pytest.raises(InvalidArgumentError, match="helix_p_value"):
        plot_sweep_metrics(a, ["helix_p_value"])  # not computed by a cheap sweep: said, not drawn as zeros


def test_sweep_helix_is_plot_checkpoints_of_the_tables(tmp_path):
    result, tables = helix_run(tmp_path, 0, "seed-a")
    fig = plot_sweep_helix(result)
    fresh = plot_checkpoints(tables, labels=[e.provenance.revision for e in tables])
    assert [f.name for f in fig.frames] == ["checkpoint-0", "checkpoint-10", "checkpoint-1000"]
    for mine, theirs in zip(fig.frames, fresh.frames, strict=True):
        for ours, ref in zip(mine.data, theirs.data, strict=True):
            assert np.allclose(np.asarray(ours.x, float), np.asarray(ref.x, float), atol=1e-5)
            assert np.allclose(np.asarray(ours.z, float), np.asarray(ref.z, float), atol=1e-5)
