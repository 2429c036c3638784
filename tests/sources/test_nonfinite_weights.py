"""Weights that hold NaN or inf give a typed error naming the tensor, on every path that reads weights; huge
finite weights give a correct atlas; a GGUF that lacks tensors the model needs is not run.

Built from the tiny models of ``tests/data/gguf_parity`` (a folder and its GGUF files written by llama.cpp's
converter), each copied and broken in one place.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import _pos_geometry_tests_gguf_files as gguf_files
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import pos_geometry as pg
from pos_geometry.errors import MissingTensorError, NonFiniteError
from pos_geometry.interventions import SwapPairing

DATA = Path(__file__).resolve().parents[1] / "data" / "gguf_parity"
TOKENS = np.random.default_rng(0).integers(0, 256, size=(2, 16))


def _folder_with(tmp_path: Path, arch: str, key: str, change) -> Path:
    """A copy of the ``arch`` folder with ``change(tensor)`` applied to weight ``key``."""
    folder = tmp_path / arch
    shutil.copytree(DATA / arch, folder)
    state = load_file(folder / "model.safetensors")
    state[key] = change(state[key].clone())
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def _set(index: tuple, value: float):
    def change(t: torch.Tensor) -> torch.Tensor:
        t[index] = value
        return t

    return change


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_the_atlas_names_the_tensor_layer_and_head_that_hold_nan_or_inf(tmp_path, value):
    folder = _folder_with(tmp_path, "llama", "model.layers.1.self_attn.k_proj.weight", _set((9, 3), value))
    with pytest.raises(NonFiniteError, match=r"k_proj\.weight.*layer 1, key head 1"):
        pg.rotary_atlas(folder)


@pytest.mark.parametrize(
    "arch, key, fold_norm, words",
    [
        ("llama", "model.layers.0.input_layernorm.weight", True, "norm gain"),
        ("qwen2", "model.layers.0.self_attn.q_proj.bias", False, "bias"),
        ("qwen3", "model.layers.0.self_attn.k_norm.weight", True, "k norm gain"),
    ],
)
def test_non_finite_gains_and_biases_are_named(tmp_path, arch, key, fold_norm, words):
    folder = _folder_with(tmp_path, arch, key, _set((1,), float("nan")))
    with pytest.raises(NonFiniteError, match=words):
        pg.rotary_atlas(folder, fold_norm=fold_norm)


def test_a_huge_finite_weight_gives_the_float64_atlas(tmp_path):
    """One weight of 1e20 overflows a float32 sum of squares; the atlas sums that head again in float64 and
    gives the shares numpy computes in float64 from the same weights."""
    key = "model.layers.0.self_attn.q_proj.weight"
    folder = _folder_with(tmp_path, "llama", key, _set((2, 5), 1e20))
    atlas = pg.rotary_atlas(folder, layers=[0])
    assert torch.isfinite(atlas.qk_share).all()
    state = load_file(folder / "model.safetensors")
    config = json.loads((folder / "config.json").read_text())
    heads, kv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    q = state[key].double().numpy().reshape(heads, hd, -1)
    k = state["model.layers.0.self_attn.k_proj.weight"].double().numpy().reshape(kv, hd, -1)
    half = hd // 2
    for h in range(heads):
        g = h // (heads // kv)
        strength = np.array(
            [np.linalg.norm(q[h, [i, i + half]].T @ k[g, [i, i + half]]) for i in range(half)]
        )  # fmt: skip
        np.testing.assert_allclose(atlas.qk_share[0, h].numpy(), strength / strength.sum(), rtol=1e-6)


def test_nan_in_a_gguf_weight_or_a_quantisation_scale_is_refused(tmp_path):
    f32 = gguf_files.poke(DATA / "llama-f32.gguf", tmp_path / "nan.gguf", "blk.0.attn_q.weight", 4 * 7,
                          struct.pack("<f", float("nan")))  # fmt: skip
    with pytest.raises(NonFiniteError, match=r"attn_q\.weight.*layer 0"):
        pg.rotary_atlas(f32)
    # Q8_0: each block of 32 values starts with its float16 scale
    q8 = gguf_files.poke(DATA / "llama-q8_0.gguf", tmp_path / "scale.gguf", "blk.1.attn_k.weight", 34 * 3,
                         struct.pack("<e", float("inf")))  # fmt: skip
    with pytest.raises(NonFiniteError, match=r"attn_k\.weight.*layer 1"):
        pg.rotary_atlas(q8)


@pytest.mark.parametrize("run", ["hidden", "intervene"])
def test_a_model_with_a_non_finite_weight_is_not_run(tmp_path, run):
    folder = _folder_with(
        tmp_path, "llama", "model.layers.1.mlp.down_proj.weight", _set((0, 0), float("nan"))
    )
    with pytest.raises(NonFiniteError, match=r"mlp\.down_proj\.weight"):
        if run == "hidden":
            pg.hidden_positions(folder, TOKENS, seq_len=16, device="cpu")
        else:
            pg.intervene(folder, TOKENS, SwapPairing(), attention=False, device="cpu", n_bootstrap=10)


def test_a_gguf_lacking_a_tensor_the_model_needs_is_not_run(tmp_path):
    """A GGUF file that holds only some of the model's tensors: the atlas reads what it holds, but the model
    is not built with random weights in the gaps."""
    partial = gguf_files.cut_gguf(DATA / "llama-f32.gguf", tmp_path / "partial.gguf", layers=2,
                                  drop=("blk.1.ffn_up.weight",))  # fmt: skip
    assert pg.rotary_atlas(partial).shape[0] == 2
    with pytest.raises(MissingTensorError, match=r"lacks 1 (weight|tensor).*up_proj"):
        pg.hidden_positions(partial, TOKENS, seq_len=16, device="cpu")


def test_shapes_are_checked_against_the_config_in_every_dimension(tmp_path):
    """A q/k projection whose columns are not hidden_size cannot exist in the model the config describes: a
    typed error, not a form; a norm gain of the wrong length with fold_norm likewise; a GGUF tensor with a
    zero dimension is refused in the header."""
    from pos_geometry.errors import CheckpointFormatError

    folder = _folder_with(
        tmp_path, "llama", "model.layers.0.self_attn.k_proj.weight", lambda t: t[:, :16].clone()
    )
    with pytest.raises(
        CheckpointFormatError, match=r"k projection has shape \(16, 16\); the config implies \(16, 32\)"
    ):
        pg.rotary_atlas(folder)
    gain = _folder_with(
        tmp_path / "g", "llama", "model.layers.0.input_layernorm.weight", lambda t: t[:8].clone()
    )
    with pytest.raises(CheckpointFormatError, match="norm gain"):
        pg.rotary_atlas(gain, fold_norm=True)
    # the first dimension of blk.0.attn_q.weight's record set to 0 (GGUF lists dimensions fastest first)
    from pos_geometry.sources.byte_source import FileByteSource
    from pos_geometry.sources.gguf.header import read_header

    src = DATA / "llama-f32.gguf"
    data = bytearray(src.read_bytes())
    name = b"blk.0.attn_q.weight"
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name) + 4  # past the name and n_dims
    data[at : at + 8] = struct.pack("<Q", 0)
    (tmp_path / "zero.gguf").write_bytes(bytes(data))
    with pytest.raises(CheckpointFormatError, match="dimension of 0"):
        read_header(FileByteSource(tmp_path / "zero.gguf"))
