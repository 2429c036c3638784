"""describe_checkpoint: what a local path holds, from headers only, and ``pos-geometry info PATH``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry.cli import app
from pos_geometry.errors import InvalidArgumentError

REAL_GGUF = Path(__file__).resolve().parents[3] / "shared/data/real_models/smollm2_135m_instruct_q4_1.gguf"


def _npy_header_only(path: Path, shape: tuple[int, ...]) -> Path:
    """A ``.npy`` file whose header promises ``shape`` of float32 and that holds no data bytes."""
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header)
    return path


def test_a_table_file_is_described_from_its_header_alone(tmp_path: Path) -> None:
    """1e6 × 768 floats are promised and none is present: the summary needs none of them, load refuses."""
    path = _npy_header_only(tmp_path / "huge.npy", (1_000_000, 768))
    summary = pg.describe_checkpoint(path)
    assert (summary.format, summary.position_key, summary.kind) == ("npy", "", "learned")
    assert len(summary.tensors) == 1
    assert summary.tensors[0].shape == (1_000_000, 768) and summary.tensors[0].stored_type == "float32"
    assert summary.config_source is None and "no config" in summary.reason
    with pytest.raises(pg.CheckpointFormatError, match="truncated"):
        pg.load(path)


def test_npz_members_compressed_or_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {"wpe": rng.normal(size=(40, 8)).astype(np.float16), "wte": rng.normal(size=(100, 8))}
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / f"{save.__name__}.npz"
        save(path, **arrays)
        summary = pg.describe_checkpoint(path)
        assert summary.format == "npz" and summary.position_key == "wpe"
        assert {t.key: (t.shape, t.stored_type) for t in summary.tensors} == {
            "wpe": ((40, 8), "float16"),
            "wte": ((100, 8), "float64"),
        }


@pytest.mark.parametrize("fmt", ["safetensors", "bin", "sharded-safetensors", "sharded-bin"])
def test_model_folders_list_every_tensor_and_the_one_load_reads(tmp_path: Path, hf_gpt2_dir, fmt) -> None:
    wpe = torch.randn(64, 16)
    directory = hf_gpt2_dir(tmp_path / fmt, wpe, fmt=fmt, dtype=torch.bfloat16)
    summary = pg.describe_checkpoint(directory)
    shapes = {t.key: t.shape for t in summary.tensors}
    assert shapes["transformer.wpe.weight"] == (64, 16) and shapes["transformer.wte.weight"] == (256, 16)
    assert {t.stored_type for t in summary.tensors} == {"bfloat16"}
    assert summary.position_key == "transformer.wpe.weight" == pg.load(directory).provenance.tensor_key
    assert summary.kind == "learned" and "holds it" in summary.reason
    assert summary.config["model_type"] == "gpt2" and summary.config["n_positions"] == 64
    assert summary.format == ("shard index" if fmt.startswith("sharded") else fmt.replace("bin", "torch-zip"))


def test_a_rotary_folder_says_there_is_no_learned_table(tmp_path: Path, write_safetensors) -> None:
    config = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "rope_theta": 500.0,
              "max_position_embeddings": 128, "num_hidden_layers": 1}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    write_safetensors(tmp_path / "model.safetensors", {"model.embed_tokens.weight": torch.zeros(10, 32)})
    summary = pg.describe_checkpoint(tmp_path)
    assert summary.kind == "rotary" and summary.position_key is None
    assert "no learned positional table" in summary.reason and summary.config["rope_theta"] == 500.0


def test_a_model_with_no_positional_table_is_named_so(tmp_path: Path, write_safetensors) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bloom", "hidden_size": 8}))
    write_safetensors(tmp_path / "model.safetensors", {"word_embeddings.weight": torch.zeros(10, 8)})
    summary = pg.describe_checkpoint(tmp_path)
    assert summary.kind == "no positional table" and "ALiBi" in summary.reason


def test_an_unknown_tensor_set_is_unknown(tmp_path: Path, write_safetensors) -> None:
    path = write_safetensors(tmp_path / "w.safetensors", {"a": torch.zeros(3), "b": torch.zeros(2, 2)})
    summary = pg.describe_checkpoint(path)
    assert summary.kind == "unknown" and summary.position_key is None and "key=" in summary.reason


def test_a_missing_path_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="No file or folder"):
        pg.describe_checkpoint(tmp_path / "nothing")


@pytest.mark.skipif(not REAL_GGUF.is_file(), reason=f"the real SmolLM2 GGUF is not at {REAL_GGUF}")
def test_the_real_gguf_model_is_rotary_with_its_metadata() -> None:
    summary = pg.describe_checkpoint(REAL_GGUF.parent)
    assert (summary.format, summary.kind, len(summary.tensors)) == ("gguf", "rotary", 272)
    assert summary.config["rope_parameters"]["rope_theta"] == 100000.0
    assert summary.layer_types == (("all", "layers 0-29", "base 100000; attends full context 8192"),)
    assert summary.config["head_dim"] == 64
    by_key = {t.key: t for t in summary.tensors}
    assert (
        by_key["blk.0.attn_k.weight"].shape == (192, 576)
        and by_key["blk.0.attn_q.weight"].stored_type == "Q4_1"
    )


def test_info_on_a_path_prints_the_summary_and_escapes_hostile_keys(
    tmp_path: Path, write_safetensors
) -> None:
    hostile = "\x1b[31mred" + "k" * 5000
    path = write_safetensors(
        tmp_path / "w.safetensors", {"wpe.weight": torch.zeros(5, 3), hostile: torch.zeros(1)}
    )
    result = CliRunner().invoke(app, ["info", str(path), "--tensors"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "safetensors" in text and "'wpe.weight', shape 5×3" in text and "learned" in text
    assert "\x1b" not in result.output and "\\x1b[31mred" in text and "(5008 characters)" in text


def test_info_on_a_name_still_describes_the_model_table() -> None:
    result = CliRunner().invoke(app, ["info", "gpt2"])
    assert result.exit_code == 0 and "openai-community/gpt2" in result.output
