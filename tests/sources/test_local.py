"""Format detection, read_checkpoint_tensor on every format, read_local on files and HF directories."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError, MissingTensorError
from pos_geometry.sources.byte_source import BytesSource, FileByteSource
from pos_geometry.sources.local import detect_format, read_checkpoint_tensor, read_local

HF_FORMATS = ("safetensors", "bin", "sharded-safetensors", "sharded-bin")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def test_detect_format_by_magic_not_extension(tmp_path: Path, write_safetensors, write_torch_bin) -> None:
    t = {"wpe.weight": torch.ones(3, 2)}
    files = {
        "safetensors": write_safetensors(tmp_path / "a.bin", t),
        "torch-zip": write_torch_bin(tmp_path / "b.safetensors", t),
    }
    np.save(tmp_path / "c.npy", np.ones(3))
    np.savez(tmp_path / "d.npz", wpe=np.ones(3))
    files |= {"npy": tmp_path / "c.npy", "npz": tmp_path / "d.npz"}
    for fmt, path in files.items():
        assert detect_format(FileByteSource(path)) == fmt


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"<!DOCTYPE html><html>not found</html>", r"first bytes b'<!DOCTYPE html><'.*Accepted: safetensors"),
        (b"", "Accepted"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\n", "Git LFS pointer"),
    ],
)
def test_unknown_formats_are_explained(data: bytes, pattern: str) -> None:
    with pytest.raises(CheckpointFormatError, match=pattern):
        detect_format(BytesSource(data))


def test_legacy_torch_pickle_asks_for_a_resave(tmp_path: Path) -> None:
    path = tmp_path / "old.bin"
    torch.save({"wpe.weight": torch.ones(2, 2)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointFormatError, match=r"legacy .*re-save"):
        read_local(path)


@pytest.mark.parametrize("fmt", HF_FORMATS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_hf_directories_round_trip_the_real_table(tmp_path: Path, gpt2_wpe, hf_gpt2_dir, fmt, dtype) -> None:
    directory = hf_gpt2_dir(tmp_path / "gpt2", gpt2_wpe, fmt=fmt, dtype=dtype)
    if fmt.startswith("sharded"):  # only the shard holding the table is opened: remove the other one
        next(directory.glob("*-00001-of-00002.*")).unlink()
    record = read_local(directory)
    expected = torch.from_numpy(gpt2_wpe).to(dtype)
    assert record.key == "transformer.wpe.weight" and record.dtype == str(dtype).removeprefix("torch.")
    assert torch.equal(_bits(record.tensor), _bits(expected))
    assert "transformer.wte.weight" in record.available_keys
    assert Path(record.file).parent == directory
    token = read_local(tmp_path / "gpt2", which="token") if not fmt.startswith("sharded") else None
    if token is not None:
        assert token.key == "transformer.wte.weight" and token.tensor.shape == (4096, 768)


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_only_the_table_bytes_are_read(tmp_path: Path, gpt2_wpe, hf_gpt2_dir, fmt: str) -> None:
    directory = hf_gpt2_dir(tmp_path, gpt2_wpe, fmt=fmt)
    src = FileByteSource(next(p for p in directory.iterdir() if p.suffix in (".safetensors", ".bin")))
    record = read_checkpoint_tensor(src)
    assert torch.equal(record.tensor, torch.from_numpy(gpt2_wpe))
    assert gpt2_wpe.nbytes <= src.bytes_read <= gpt2_wpe.nbytes + 8192
    assert src.bytes_read < 0.25 * src.size


@pytest.mark.parametrize(
    "key",
    [
        "wpe.weight",
        "model.decoder.embed_positions.weight",
        "decoder.embed_positions.weight",
        "bert.embeddings.position_embeddings.weight",
        "roberta.embeddings.position_embeddings.weight",
        "embeddings.position_embeddings.weight",
    ],
)
def test_key_variants_in_model_directories(tmp_path: Path, gpt2_wpe, hf_gpt2_dir, key: str) -> None:
    record = read_local(hf_gpt2_dir(tmp_path, gpt2_wpe[:64], fmt="safetensors", key=key))
    assert record.key == key and torch.equal(record.tensor, torch.from_numpy(gpt2_wpe[:64]))


def test_gpt1_table_under_its_own_key(tmp_path: Path, gpt1_positions, write_torch_bin) -> None:
    t = torch.from_numpy(gpt1_positions)
    write_torch_bin(tmp_path / "pytorch_model.bin", {"transformer.positions_embed.weight": t})
    record = read_local(tmp_path)
    assert record.key == "transformer.positions_embed.weight" and torch.equal(record.tensor, t)


def test_npy_and_npz_files(tmp_path: Path, gpt2_wpe) -> None:
    np.save(tmp_path / "wpe.npy", gpt2_wpe)
    np.savez(tmp_path / "one.npz", gpt2_wpe)
    np.savez(tmp_path / "many.npz", a=gpt2_wpe[:3], **{"transformer.wpe.weight": gpt2_wpe}, z=gpt2_wpe[:5])
    expected = torch.from_numpy(gpt2_wpe)
    assert read_local(tmp_path / "wpe.npy").key == ""
    for name, key in [("wpe.npy", ""), ("one.npz", "arr_0"), ("many.npz", "transformer.wpe.weight")]:
        record = read_local(tmp_path / name)
        assert record.key == key and torch.equal(record.tensor, expected)
    assert read_local(tmp_path / "many.npz", key="z").tensor.shape == (5, 768)
    with pytest.raises(MissingTensorError, match=r"a, transformer\.wpe\.weight, z"):
        read_local(tmp_path / "many.npz", key="b")


def test_directory_preference_and_index_file_paths(tmp_path: Path, hf_gpt2_dir, write_torch_bin) -> None:
    st = torch.randn(8, 4)
    hf_gpt2_dir(tmp_path, st, fmt="safetensors")
    write_torch_bin(tmp_path / "pytorch_model.bin", {"transformer.wpe.weight": torch.zeros(8, 4)})
    assert torch.equal(read_local(tmp_path).tensor, st)  # model.safetensors wins
    sharded = hf_gpt2_dir(tmp_path / "s", st, fmt="sharded-bin")
    assert torch.equal(read_local(sharded / "pytorch_model.bin.index.json").tensor, st)


def test_broken_directories(tmp_path: Path, hf_gpt2_dir) -> None:
    with pytest.raises(InvalidArgumentError, match="No checkpoint file"):
        read_local(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(CheckpointFormatError, match=r"holds none of .*config.json"):
        read_local(tmp_path / "empty")
    directory = hf_gpt2_dir(tmp_path / "m", torch.ones(8, 4), fmt="sharded-safetensors")
    next(directory.glob("*-00002-of-00002.*")).unlink()
    with pytest.raises(CheckpointFormatError, match=r"does not exist\. Download"):
        read_local(directory)
    index = directory / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"transformer.wpe.weight": "../../secret.safetensors"}}))
    with pytest.raises(CheckpointFormatError, match="inside the model directory"):
        read_local(directory)


def test_fmt_and_which_are_validated() -> None:
    src = BytesSource(struct.pack("<Q", 2) + b"{}")
    with pytest.raises(InvalidArgumentError, match="fmt must be one of"):
        read_checkpoint_tensor(src, fmt="gguf")
    with pytest.raises(InvalidArgumentError, match="which must be"):
        read_checkpoint_tensor(src, which="pos")  # type: ignore[arg-type]
    with pytest.raises(MissingTensorError, match="no tensors at all"):
        read_checkpoint_tensor(src)


def _tiny_models():
    transformers = pytest.importorskip("transformers")
    common = {
        "vocab_size": 100,
        "max_position_embeddings": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
    }
    return {
        "gpt2": transformers.GPT2LMHeadModel(
            transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_positions=64, vocab_size=100)
        ),
        "opt": transformers.OPTForCausalLM(
            transformers.OPTConfig(hidden_size=32, ffn_dim=64, word_embed_proj_dim=32, **common)
        ),
        "neox": transformers.GPTNeoXForCausalLM(
            transformers.GPTNeoXConfig(hidden_size=32, intermediate_size=64, **common)
        ),
        "mistral": transformers.MistralForCausalLM(
            transformers.MistralConfig(hidden_size=32, intermediate_size=64, num_key_value_heads=1, **common)
        ),
    }


def test_checkpoints_written_by_transformers(tmp_path: Path) -> None:
    """save_pretrained (safetensors; transformers 5 has no safe_serialization=False) and torch.save
    of the state dict (what pytorch_model.bin is)."""
    torch.manual_seed(0)
    models = _tiny_models()
    for name, model in models.items():
        model.save_pretrained(tmp_path / name)
        torch.save(model.state_dict(), tmp_path / f"{name}.bin")
    for path in (tmp_path / "gpt2", tmp_path / "gpt2.bin"):
        record = read_local(path)
        assert record.key == "transformer.wpe.weight"
        assert torch.equal(record.tensor, models["gpt2"].transformer.wpe.weight.detach())
    for path in (tmp_path / "opt", tmp_path / "opt.bin"):
        record = read_local(path)  # the full table, with OPT's 2 offset rows (the loader drops them)
        assert record.key == "model.decoder.embed_positions.weight" and record.tensor.shape == (66, 32)
        assert torch.equal(record.tensor, models["opt"].model.decoder.embed_positions.weight.detach())
    for name, token_key in [("neox", "gpt_neox.embed_in.weight"), ("mistral", "model.embed_tokens.weight")]:
        for path in (tmp_path / name, tmp_path / f"{name}.bin"):
            with pytest.raises(MissingTensorError, match="rotary") as info:
                read_local(path)
            assert token_key in info.value.keys and token_key in str(info.value)
            assert read_local(path, which="token").key == token_key
