"""PositionalEmbedding and Provenance: validation, processing records, lossless save/load."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from pos_geometry import NonFiniteError, PositionalEmbedding, Provenance
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError

PROV = Provenance(
    model_id="gpt2",
    kind="learned",
    source="model.safetensors::wpe.weight",
    revision="main",
    tensor_key="wpe.weight",
    original_dtype="float16",
    row_offset=0,
    commit="0" * 40,
)


def _pe(n: int = 16, d: int = 8, dtype=torch.float32) -> PositionalEmbedding:
    g = torch.Generator().manual_seed(0)
    return PositionalEmbedding(torch.randn(n, d, generator=g).to(dtype), PROV)


def test_shape_properties_and_repr():
    pe = _pe(16, 8)
    assert pe.shape == (16, 8) and pe.n_positions == 16 and pe.d_model == 8 and len(pe) == 16
    assert pe.kind == "learned"
    assert "gpt2@main" in repr(pe) and "(16, 8)" in repr(pe)


@pytest.mark.parametrize("bad", [torch.zeros(3), torch.zeros(2, 3, 4), torch.zeros(0, 4)])
def test_rejects_non_matrices(bad):
    with pytest.raises(InvalidArgumentError, match="2-D"):
        PositionalEmbedding(bad, PROV)


def test_rejects_integer_matrix():
    with pytest.raises(InvalidArgumentError, match="floating point"):
        PositionalEmbedding(torch.zeros(2, 3, dtype=torch.int64), PROV)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_is_refused_with_location(value):
    m = torch.zeros(5, 4)
    m[3, 2] = value
    with pytest.raises(NonFiniteError, match="row 3, column 2"):
        PositionalEmbedding(m, PROV)


def test_unknown_kind_is_refused():
    with pytest.raises(InvalidArgumentError, match="kind"):
        Provenance(model_id="x", kind="alibi", source="s")


def test_rows_and_center_are_recorded_and_correct():
    pe = _pe(10, 4)
    sub = pe.rows(1, None)
    assert sub.provenance.processing == ("rows[1:10]",)
    assert torch.equal(sub.matrix, pe.matrix[1:])
    c = sub.center("d_model")
    assert c.provenance.processing == ("rows[1:10]", "center_d_model")
    torch.testing.assert_close(c.matrix.mean(dim=1), torch.zeros(9), atol=1e-6, rtol=0)
    cp = pe.center()
    torch.testing.assert_close(cp.matrix.mean(dim=0), torch.zeros(4), atol=1e-6, rtol=0)
    assert cp.provenance.processing[-1] == "center_positions"
    assert pe.provenance.processing == ()  # the original is untouched
    with pytest.raises(InvalidArgumentError, match="selects no positions"):
        pe.rows(5, 5)


def test_provenance_json_round_trip_and_config_freezing():
    p = dataclasses.replace(PROV, config={"rope_theta": 10000.0, "head_dim": 64}, processing=("a", "b"))
    assert p.config == (("head_dim", 64), ("rope_theta", 10000.0))
    hash(p)  # frozen and hashable even with a config
    q = Provenance.from_json(p.to_json())
    assert q == p
    assert json.loads(p.to_json())["config"] == {"head_dim": 64, "rope_theta": 10000.0}
    with pytest.raises(CheckpointFormatError, match="unknown fields"):
        Provenance.from_dict({**p.to_dict(), "surprise": 1})


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_save_load_is_lossless(tmp_path, suffix, dtype):
    pe = PositionalEmbedding(_pe(32, 8).matrix.to(dtype), PROV.with_processing("center_d_model"))
    path = pe.save(tmp_path / f"table{suffix}")
    back = PositionalEmbedding.load(path)
    assert back.dtype == dtype
    assert torch.equal(back.matrix, pe.matrix)
    assert back.provenance == pe.provenance
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


def test_real_table_round_trip(tmp_path, gpt2_wpe):
    pe = PositionalEmbedding(torch.from_numpy(gpt2_wpe), PROV)
    for suffix in (".npz", ".safetensors"):
        back = PositionalEmbedding.load(pe.save(tmp_path / f"wpe{suffix}"))
        assert np.array_equal(back.numpy(), gpt2_wpe)


def test_save_rejects_unknown_suffix(tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"'\.npz' or '\.safetensors'"):
        _pe().save(tmp_path / "x.pt")
    assert list(tmp_path.iterdir()) == []


def test_load_rejects_foreign_file(tmp_path):
    f = tmp_path / "other.npz"
    np.savez(f, something=np.zeros(3))
    with pytest.raises(CheckpointFormatError, match="not a pos_geometry embedding file"):
        PositionalEmbedding.load(f)


@pytest.mark.parametrize(
    ("model_id", "name"),
    [
        ("gpt2", "gpt2"),
        ("EleutherAI/pythia-70m", "EleutherAI/pythia-70m"),  # a hub repo id stays whole
        ("../shared/data/real/gpt2_small_wpe.npy", "gpt2_small_wpe"),
        ("helix.npy", "helix"),
        ("/models/my-gpt/model.safetensors", "my-gpt"),  # a generic file name: its folder
        ("/models/my-gpt/pytorch_model-00001-of-00002.bin", "my-gpt"),
        ("/models/my-gpt", "my-gpt"),
        ("/hf/hub/models--openai-community--gpt2/snapshots/0123abc", "openai-community/gpt2"),
        ("C:\\tables\\wpe.npy", "wpe"),
    ],
)
def test_readable_name_is_a_name_not_a_path(model_id: str, name: str) -> None:
    from pos_geometry.embedding import readable_name

    assert readable_name(model_id) == name
    prov = Provenance(model_id, "learned", model_id)
    assert prov.name == name and prov.model_id == model_id  # the path stays in the provenance


def test_provenance_repr_shows_nearby_paths_relative_and_keeps_the_record(tmp_path, monkeypatch):
    """A notebook run from ``repo/notebooks`` shows ``../../shared/...``, not this machine's absolute path;
    the recorded source is unchanged, and a path far from the working directory is kept as it is."""
    shared = tmp_path / "shared" / "data" / "wpe.npy"
    work = tmp_path / "repo" / "notebooks"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    prov = dataclasses.replace(PROV, source=f"{shared}::wpe.weight", config={"n_positions": 16})
    text = repr(prov)
    assert "'../../shared/data/wpe.npy::wpe.weight'" in text and str(tmp_path) not in text
    assert prov.source == f"{shared}::wpe.weight"  # the record keeps the absolute path
    assert "commit='000" in text and "config: 1 fields" in text and len(text) < 400
    far = dataclasses.replace(PROV, source="/usr/share/x.npy (real tables)")
    assert "'/usr/share/x.npy (real tables)'" in repr(far)
