"""A sweep SIGKILLed mid-way (in a subprocess) resumes without re-fetching its finished checkpoints, and leaves
no half-written file in its store or the tensor cache once re-run.

No timing is guessed: the loopback hub holds back the tensor reads of the last two checkpoints (a gate on
the server), so the killed run is certain to be mid-way: its other checkpoints are stored, and the held
ones are blocked inside their tensor read (the rotary run reduces its q/k tensors as they stream in and
writes no tensor to the cache, so it has no half-written file to leave there).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import _pos_geometry_tests_hub_server as hub_server
import pandas as pd
import pytest

from pos_geometry.sweeps import sweep
from pos_geometry.sweeps.store import SweepStore

REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD = (
    "import sys; from pos_geometry.sweeps import sweep; "
    "sweep(sys.argv[1], sys.argv[2].split(','), analyses='cheap', store=sys.argv[3], n_workers=2, progress=False)"
)


def _hold_tensor_reads(monkeypatch, commits: set[str]) -> tuple[threading.Event, list[str]]:
    """Make the server block every ranged GET of a weight file of ``commits`` past its header (offset > 0)
    until the returned event is set; the list collects the requests held."""
    gate, held = threading.Event(), []
    begin = hub_server._Handler._begin

    def gated(self):
        rng = self.headers.get("Range") or ""
        if (
            self.command == "GET"
            and rng
            and not rng.startswith("bytes=0-")
            and any(c in self.path for c in commits)
        ):
            held.append(self.path)
            gate.wait(60)
        return begin(self)

    monkeypatch.setattr(hub_server._Handler, "_begin", gated)
    return gate, held


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["rotary", "learned"])
def test_a_killed_sweep_resumes_without_refetching(kind, request, monkeypatch, tmp_path):
    run = request.getfixturevalue("rotary_training_run" if kind == "rotary" else "training_run")
    hub_server.point_hub_at(monkeypatch, run.server, tmp_path)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    revisions = list(run.good[:5])
    finished, blocked = revisions[:3], revisions[3:]
    blocked_commits = {run.commits[r] for r in blocked}
    gate, held = _hold_tensor_reads(monkeypatch, blocked_commits)
    store = tmp_path / "store"
    cache = tmp_path / "pos_geometry_cache"
    run.server.clear_log()

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, run.repo, ",".join(revisions), str(store)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        held_commits = lambda: {c for c in blocked_commits if any(c in path for path in held)}  # noqa: E731
        while not (
            len(held_commits()) == len(blocked) and all(SweepStore(store).path(r).exists() for r in finished)
        ):  # a checkpoint may hold several reads at once (the atlas streams several q/k tensors at once)
            assert child.poll() is None, (
                f"the sweep ended before it was killed:\n{child.stderr.read()[-2000:]}"
            )
            assert time.monotonic() < deadline, "the sweep did not reach the held checkpoints in 120 s"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        gate.set()
    first_log = run.server.requests()

    # the store holds exactly the finished checkpoints, each complete
    assert [p.name for p in _files(store)] == sorted(SweepStore(store).path(r).name for r in finished)
    if kind == "rotary":  # the killed streams were being reduced, not written: the cache has no temporary
        assert not [p for p in _files(cache) if p.name.startswith(".")]

    run.server.clear_log()
    result = sweep(run.repo, revisions, analyses="cheap", store=store, n_workers=2)
    log = run.server.requests()
    assert result.n_resumed == len(finished) and result.n_computed == len(blocked)
    assert [r.status for r in result.records] == ["ok"] * len(revisions)
    for revision in finished:  # fetched once, by the killed run; nothing of it again
        assert any(run.commits[revision] in r.path and r.range for r in first_log)
        assert not any(run.commits[revision] in r.path for r in log if r.range)
        assert result[revision].resumed and result[revision].bytes_read == 0
    for revision in blocked:
        assert any(run.commits[revision] in r.path for r in log if r.range)
    # nothing half-written anywhere: the store has only complete results, the cache nothing (keep_tables=False)
    assert all(not p.name.startswith(".") for p in _files(store)) and len(_files(store)) == len(revisions)
    assert not _files(cache)
    # and the results are those of a sweep that was never interrupted
    fresh = sweep(run.repo, revisions, analyses="cheap", store=tmp_path / "fresh", n_workers=2)
    cols = ["resumed", "bytes_read", "requests"]
    pd.testing.assert_frame_equal(result.to_frame().drop(columns=cols), fresh.to_frame().drop(columns=cols))
