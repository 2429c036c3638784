"""Interrupted writes and ambiguous records (hostile inputs, class 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources import cache
from pos_geometry.sources.local import read_local
from pos_geometry.sources.tensor_record import TensorRecord

COMMIT = "c" * 40
_WRITER = """
import sys, time, torch
import pos_geometry.sources.cache as cache
from pos_geometry.sources.tensor_record import TensorRecord
cache.WRITE_CHUNK = 1024
real = cache.atomic_writer
def slow(path):
    class Slow:
        def __init__(self, fh): self.fh = fh
        def write(self, data):
            self.fh.write(data); self.fh.flush(); print("wrote", flush=True); time.sleep(0.05)
    import contextlib
    @contextlib.contextmanager
    def inner():
        with real(path) as fh:
            yield Slow(fh)
    return inner()
cache.atomic_writer = slow
record = TensorRecord(torch.zeros(256, 64), "wpe.weight", "model.safetensors", "float32", ("wpe.weight",))
cache.store_tensor("acme/tiny", sys.argv[1], record)
"""


def _killed_mid_write(root: Path, after: int) -> list[Path]:
    """Run a writer in another process and SIGKILL it after its ``after``-th chunk; its leftovers."""
    env = {**os.environ, "POS_GEOMETRY_CACHE": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, COMMIT], env=env, stdout=subprocess.PIPE, text=True
    )
    for _ in range(after):
        assert proc.stdout.readline().startswith("wrote")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    folder = cache.commit_dir("acme/tiny", COMMIT)
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize(
    "after", [1, pytest.param(8, marks=pytest.mark.slow), pytest.param(40, marks=pytest.mark.slow)]
)
def test_a_killed_writer_leaves_no_entry_and_its_temporary_is_cleaned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path))
    left = _killed_mid_write(tmp_path, after)
    assert left and all(p.name.endswith(".tmp") for p in left)  # a temporary, never a partial entry
    assert cache.cached_tensor("acme/tiny", COMMIT, "wpe.weight") is None
    record = TensorRecord(torch.ones(4, 2), "wpe.weight", "model.safetensors", "float32", ("wpe.weight",))
    cache.store_tensor("acme/tiny", COMMIT, record)  # a later good load
    names = [p.name for p in cache.commit_dir("acme/tiny", COMMIT).iterdir()]
    assert names == ["wpe.weight.safetensors"]  # the dead writer's temporary is gone
    assert torch.equal(cache.cached_tensor("acme/tiny", COMMIT, "wpe.weight").tensor, torch.ones(4, 2))


def test_a_live_writers_temporary_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path))
    folder = cache.commit_dir("acme/tiny", COMMIT)
    folder.mkdir(parents=True)
    mine = folder / f".x.safetensors.{os.getpid()}-abcdef12.tmp"  # this process is alive
    mine.write_bytes(b"partial")
    record = TensorRecord(torch.ones(2, 2), "wpe.weight", "model.safetensors", "float32", ("wpe.weight",))
    cache.store_tensor("acme/tiny", COMMIT, record)
    assert mine.exists()


def test_a_flattened_key_resolves_as_torch_load_does(tmp_path: Path) -> None:
    """A top-level 'wpe.weight' and a nested {'wpe': {'weight': ...}}: torch.load (and so transformers)
    gives the top-level tensor under that name, in either order; two nested ones are refused."""
    top, decoy = torch.arange(6.0).reshape(3, 2), torch.full((3, 2), -1.0)
    for order in (("wpe.weight", "wpe"), ("wpe", "wpe.weight")):
        state = OrderedDict((k, top if k == "wpe.weight" else {"weight": decoy}) for k in order)
        path = tmp_path / f"{order[0]}.bin"
        torch.save(state, path)
        assert torch.equal(torch.load(path, weights_only=True)["wpe.weight"], top)
        assert torch.equal(read_local(path, key="wpe.weight").tensor, top)
    torch.save({"a": {"b.weight": top}, "a.b": {"weight": decoy}, "wpe.weight": top}, tmp_path / "twice.bin")
    with pytest.raises(CheckpointFormatError, match=r"name two nested tensors .*'a\.b\.weight'"):
        read_local(tmp_path / "twice.bin")
