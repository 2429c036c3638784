"""The result store: complete-or-absent files, reused only under the same config and commit."""

from __future__ import annotations

import numpy as np

from pos_geometry import Provenance
from pos_geometry.sweeps.record import CheckpointRecord, Outcome
from pos_geometry.sweeps.store import SweepStore

COMMIT = "a" * 40


def ok_outcome(revision: str = "checkpoint-10") -> Outcome:
    prov = Provenance("m", "learned", "model.safetensors::wpe", revision=revision, commit=COMMIT)
    record = CheckpointRecord(
        revision, 10, "ok", commit=COMMIT, bytes_read=5, requests=2,
        metrics={"top3_ratio": 0.5, "helix_period": None, "helix_delta_bic": float("inf")}, provenance=prov,
    )  # fmt: skip
    return Outcome(record, {"components": np.eye(3, 6, dtype=np.float32)})


def test_round_trip_and_what_is_reused(tmp_path):
    store = SweepStore(tmp_path / "s")
    assert store.put(ok_outcome(), "fp1")
    got = store.get("checkpoint-10", "fp1", COMMIT)
    assert got.provenance == ok_outcome().record.provenance and got.metrics["top3_ratio"] == 0.5
    assert got.metrics["helix_delta_bic"] is None  # strict JSON: a non-finite number is stored as null
    assert np.array_equal(store.arrays("checkpoint-10")["components"], np.eye(3, 6, dtype=np.float32))
    assert store.get("checkpoint-10", "fp2") is None  # other analyses: recomputed
    assert store.get("checkpoint-10", "fp1", "b" * 40) is None  # the branch moved: recomputed
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["checkpoint-10.safetensors"]  # no temp file


def test_only_results_and_pinned_failures_are_stored(tmp_path):
    store = SweepStore(tmp_path)
    for status, kept in (("corrupt", True), ("non-finite", True), ("unreachable", False), ("error", False)):
        assert store.put(Outcome(CheckpointRecord(f"r-{status}", None, status, "why")), "fp") is kept


def test_a_damaged_file_is_ignored(tmp_path):
    store = SweepStore(tmp_path)
    store.put(ok_outcome(), "fp")
    path = store.path("checkpoint-10")
    path.write_bytes(path.read_bytes()[:30])
    assert store.get("checkpoint-10", "fp") is None and store.arrays("checkpoint-10") == {}


def test_a_killed_writers_temporary_is_removed_and_a_live_ones_kept(tmp_path):
    import os
    import subprocess
    import sys

    from pos_geometry.sweeps.store import remove_stale_temporaries

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid runs nothing now
    store = SweepStore(tmp_path)
    store.put(ok_outcome(), "fp")
    finished = store.path("checkpoint-10")
    stale = tmp_path / f".{finished.name}.{dead.pid}-0a1b2c3d.tmp"
    live = tmp_path / f".{finished.name}.{os.getpid()}-4e5f6a7b.tmp"
    for path in (stale, live):
        path.write_bytes(b"half a file")
    assert remove_stale_temporaries(tmp_path) == 1
    assert not stale.exists() and live.exists() and store.get("checkpoint-10", "fp") is not None
