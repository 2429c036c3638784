"""Hostile inputs that ask for work: allocations bounded before they happen, config values validated like file
bytes, and every error typed (names that would become paths: tests/sources/test_names.py; config values read by
every path: tests/core/test_config_values.py). Each class has more than one attack.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch as st
import torch
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry.cli import app
from pos_geometry.encodings.rotary import rotary_embedding
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError
from pos_geometry.sources.roles import head_counts

LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 256,
         "rope_theta": 10000.0, "num_hidden_layers": 2}  # fmt: skip


# --- allocations are bounded before they happen ---
@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("max_position_embeddings", 10**12, "POS_GEOMETRY_MAX_ELEMENTS"),
        ("head_dim", 10**9, "head_dim is 1,000,000,000, above 65,536"),
        ("hidden_size", 2**40, "hidden_size is"),
    ],
)
def test_config_sizes_are_checked_before_allocating(
    tmp_path: Path, field: str, value: int, match: str
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, field: value}))
    with pytest.raises(InvalidArgumentError, match=match):
        pg.load(tmp_path)


def test_layer_and_head_counts_are_bounded() -> None:
    with pytest.raises(InvalidArgumentError, match="num_hidden_layers is 1,000,000,000"):
        head_counts({"num_hidden_layers": 10**9, "num_attention_heads": 4})
    with pytest.raises(InvalidArgumentError, match="num_key_value_heads"):
        head_counts({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2**20})


def test_the_element_limit_names_its_variable_and_can_be_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POS_GEOMETRY_MAX_ELEMENTS", "1000")
    with pytest.raises(InvalidArgumentError, match=r"POS_GEOMETRY_MAX_ELEMENTS=<elements>") as info:
        rotary_embedding(LLAMA, model_id="x")  # 256 × 16 = 4096 elements
    assert "n_positions=" in str(info.value)
    assert rotary_embedding(LLAMA, model_id="x", n_positions=62).shape == (62, 16)
    monkeypatch.setenv("POS_GEOMETRY_MAX_ELEMENTS", "5000")
    assert rotary_embedding(LLAMA, model_id="x").shape == (256, 16)


def test_a_declared_shape_is_checked_before_reading(tmp_path: Path) -> None:
    """A sparse .npy whose header declares 2^31 float32 values (8 GiB, all holes): refused, nothing allocated."""
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648,), }"
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    path = tmp_path / "sparse.npy"
    with open(path, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header)
        fh.truncate(fh.tell() + 4 * 2**31)
    with pytest.raises(InvalidArgumentError, match="POS_GEOMETRY_MAX_ELEMENTS"):
        pg.load(path)


def test_a_compressed_member_is_bounded_before_inflating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    np.savez_compressed(tmp_path / "bomb.npz", wpe=np.zeros((1024, 1024), dtype=np.float32))  # 4 MiB of zeros
    monkeypatch.setenv("POS_GEOMETRY_MAX_INFLATE", str(2**20))
    with pytest.raises(InvalidArgumentError, match=r"would inflate to .* POS_GEOMETRY_MAX_INFLATE"):
        pg.load(tmp_path / "bomb.npz")
    monkeypatch.delenv("POS_GEOMETRY_MAX_INFLATE")
    assert pg.load(tmp_path / "bomb.npz").shape == (1024, 1024)


@pytest.mark.parametrize("rows", [20_000, 16_385])
def test_long_tables_are_refused_with_a_window_hint(rows: int) -> None:
    table = pg.PositionalEmbedding(torch.randn(rows, 4), pg.Provenance("long", "learned", "test"))
    for call in (lambda: pg.analyze(table), lambda: pg.periodicity(table)):
        with pytest.raises(InvalidArgumentError, match=r"POS_GEOMETRY_MAX_POSITIONS.*window=\(0, 16384\)"):
            call()
    assert pg.analyze(table, window=(0, 64), analyses=("periodicity",), n_surrogates=9, alpha=0.1).periodicity


def test_config_json_is_bounded_in_size_and_nesting(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointFormatError, match="nested too deeply"):
        pg.load(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "pad": "x" * (17 * 2**20)}))
    with pytest.raises(CheckpointFormatError, match=r"more than the 16,777,216 a config\.json"):
        pg.load(tmp_path)


# --- config values are validated like file bytes ---
@pytest.mark.parametrize(
    ("scaling", "match"),
    [
        ({"rope_type": "linear", "factor": 0}, r"rope_scaling.factor .* is 0"),
        ({"rope_type": "linear", "factor": 5e-324}, "is 5e-324"),
        ({"rope_type": "dynamic", "factor": -2.0}, "is -2.0"),
        ({"rope_type": "linear", "factor": "2"}, "is '2'"),
        ({"rope_type": "yarn", "factor": 4.0, "beta_fast": -1.0}, "beta_fast"),
        (
            {"rope_type": "yarn", "factor": 4.0, "beta_fast": 1.0, "beta_slow": 32.0},
            "beta_fast .* greater than",
        ),
        ({"rope_type": "yarn", "factor": 4.0, "attention_factor": float("nan")}, "attention_factor"),
        (
            {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0, "high_freq_factor": 4.0},
            "low_freq_factor",
        ),
        (
            {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0},
            "greater than",
        ),
        ({"rope_type": "longrope", "short_factor": [0.0] * 8, "long_factor": [1.0] * 8}, "short_factor"),
        ({"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": ["x"] * 8}, "long_factor"),
    ],
)
def test_rope_scaling_values_get_a_typed_error(scaling: dict, match: str) -> None:
    config = {**LLAMA, "rope_scaling": {**scaling, "original_max_position_embeddings": 64}}
    with pytest.raises(InvalidArgumentError, match=match) as info:
        rotary_embedding(config, model_id="x")
    assert "Fix the config" in str(info.value)


def test_valid_rope_scaling_still_builds_a_finite_table() -> None:
    config = {**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}  # fmt: skip
    table = rotary_embedding(config, model_id="x")
    assert torch.isfinite(table.matrix).all()


# --- every error is typed; the CLI prints no internal error ---
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_tables_load(tmp_path: Path, dtype: torch.dtype) -> None:
    values = torch.randn(16, 8)
    st.save_file({"wpe.weight": values.to(dtype)}, tmp_path / "f8.safetensors")
    table = pg.load(tmp_path / "f8.safetensors")
    assert table.dtype == torch.float32 and table.provenance.original_dtype == str(dtype).removeprefix(
        "torch."
    )
    assert torch.equal(table.matrix, values.to(dtype).to(torch.float32))


def test_float32_extremes_give_a_typed_error_and_float64_works(tmp_path: Path) -> None:
    x = np.full((64, 8), np.finfo(np.float32).max, dtype=np.float32)
    x[::2] *= -1
    np.save(tmp_path / "big.npy", x)
    with pytest.raises(InvalidArgumentError, match=r"overflow float32 .* float64"):
        pg.analyze(pg.load(tmp_path / "big.npy"), n_surrogates=9, alpha=0.1)
    result = CliRunner().invoke(app, ["analyze", str(tmp_path / "big.npy")])
    assert result.exit_code == 1 and "overflow float32" in result.output and "Traceback" not in result.output
    a = pg.analyze(pg.load(tmp_path / "big.npy", dtype=torch.float64), n_surrogates=9, alpha=0.1)
    assert a.top3 == pytest.approx(1.0)
