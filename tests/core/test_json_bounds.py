"""Every JSON pos_geometry reads is read with its nesting bounded: a deep document is a typed error naming its
source, never a RecursionError (configs, shard indexes, the provenance of an exported table)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pos_geometry as pg
from pos_geometry._json import MAX_DEPTH, depth, loads
from pos_geometry.errors import CheckpointFormatError

DEEP = "[" * 100_000 + "]" * 100_000
MODERATE = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)  # under Python's own recursion limit, over ours


@pytest.mark.parametrize("text", [DEEP, MODERATE])
def test_deep_json_is_a_typed_error(text):
    with pytest.raises(CheckpointFormatError, match="nested"):
        loads(text, "the test's JSON")


def test_depth_counts_levels_without_recursion():
    assert depth(1) == 0 and depth([]) == 1 and depth({"a": [1, {"b": []}]}) == 4
    assert loads('{"a": [1, 2]}', "x") == {"a": [1, 2]}


def test_an_exported_tables_deep_provenance_is_refused(tmp_path):
    table = pg.sinusoidal(16, 8)
    path = tmp_path / "t.npz"
    table.save(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = dict(data)
    assert "provenance" in arrays
    arrays["provenance"] = np.array(DEEP)
    np.savez(path, **arrays)
    with pytest.raises(CheckpointFormatError, match="provenance JSON is JSON nested too deeply"):
        pg.PositionalEmbedding.load(path)


@pytest.mark.parametrize("text", [DEEP, MODERATE])
def test_a_deep_config_is_refused(tmp_path, text):
    (tmp_path / "config.json").write_text(text)
    np.save(tmp_path / "x.npy", np.zeros((4, 4), dtype=np.float32))
    with pytest.raises(CheckpointFormatError, match="nested"):
        pg.describe_checkpoint(tmp_path)


def test_a_huge_config_says_it_is_too_large_not_invalid(tmp_path, monkeypatch):
    import pos_geometry._limits as limits

    monkeypatch.setattr(limits, "MAX_CONFIG_BYTES", 10)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(CheckpointFormatError, match=r"more than the 10 a config\.json"):
        limits.read_config_json(tmp_path / "config.json", "config.json")
