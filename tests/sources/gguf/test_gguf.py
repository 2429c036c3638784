"""GGUF as a source: the header parser, names, dequantisation, llama.cpp's q/k permutation undone, load and atlas.

Oracles: ``gguf.GGUFReader`` for the header; the transformers model a GGUF file was written from (the
file is written by the test with llama.cpp's converter permutation, ``gguf_files.py``); transformers'
own GGUF loader (``from_pretrained(gguf_file=...)``) on the real SmolLM2 file's bytes.
"""

from __future__ import annotations

import json
import struct

import _pos_geometry_tests_gguf_files as gguf_files
import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.errors import CheckpointFormatError, MissingTensorError
from pos_geometry.sources.byte_source import BytesSource, FileByteSource
from pos_geometry.sources.gguf.checkpoint import PERMUTED_QK, GGUFWeights
from pos_geometry.sources.gguf.config import CONFIG_FIELDS
from pos_geometry.sources.gguf.header import LargeArray, read_header
from pos_geometry.sources.roles import read_qk


def _tiny_llama(seed: int = 0, **overrides) -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=2, vocab_size=64, max_position_embeddings=256, **overrides,
    )  # fmt: skip
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Llama, its transformers folder, and the same weights as F32 and Q8_0 GGUF files."""
    folder = tmp_path_factory.mktemp("gguf")
    model = _tiny_llama()
    model.save_pretrained(folder / "hf")
    f32 = gguf_files.llama_to_gguf(model, folder / "tiny-f32.gguf", "F32")
    q8 = gguf_files.llama_to_gguf(model, folder / "tiny-q8_0.gguf", "Q8_0")
    return model, folder / "hf", f32, q8


def test_header_matches_ggufreader(tiny):
    from gguf import GGUFReader

    path = tiny[3]
    ours, theirs = read_header(FileByteSource(path)), GGUFReader(path)
    assert ours.data_offset == theirs.data_offset
    assert list(ours.tensors) == [t.name for t in theirs.tensors]
    for t in theirs.tensors:
        info = ours.tensors[t.name]
        assert (info.offset, info.n_bytes, info.ggml_type) == (t.data_offset, t.n_bytes, int(t.tensor_type))
        assert info.shape == tuple(reversed(t.shape.tolist()))
    for key, field in theirs.fields.items():
        if key.startswith("GGUF."):
            continue
        if isinstance(ours.fields[key], LargeArray):  # the vocabulary: counted and skipped, not kept
            assert ours.fields[key].count == len(field.data) > 4096, key
        else:
            value = field.contents()
            assert ours.fields[key] == (tuple(value) if isinstance(value, list) else value), key
    assert isinstance(ours.fields["tokenizer.ggml.tokens"], LargeArray)
    assert ours.fields["tokenizer.ggml.scores"] == tuple(range(4)) and ours.fields["general.name"] == "tiny"


def test_q_and_k_read_from_gguf_are_the_transformers_weights(tiny):
    """The file holds llama.cpp's permuted rows; read back, they are the model's own rows again."""
    model, _, f32, q8 = tiny
    w = read_qk(f32)
    for layer in range(2):
        attn = model.model.layers[layer].self_attn
        torch.testing.assert_close(w.q[layer].reshape(-1, 64), attn.q_proj.weight.detach(), rtol=0, atol=0)
        torch.testing.assert_close(w.k[layer].reshape(-1, 64), attn.k_proj.weight.detach(), rtol=0, atol=0)
    # Q8_0: the same, up to the quantisation the gguf package itself computes
    from gguf.constants import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    wq = read_qk(q8)
    expected = dequantize(
        quantize(model.model.layers[1].self_attn.q_proj.weight.detach().numpy(), Q.Q8_0), Q.Q8_0
    )
    torch.testing.assert_close(wq.q[1].reshape(-1, 64), torch.from_numpy(expected), rtol=0, atol=0)
    # a naive reader (the stored rows as they are) differs: the permutation is real
    weights = GGUFWeights(FileByteSource(f32))
    info = weights.header.tensors["blk.0.attn_q.weight"]
    raw = np.frombuffer(FileByteSource(f32).read(info.offset, info.n_bytes), np.float32).reshape(info.shape)
    assert not np.array_equal(raw, model.model.layers[0].self_attn.q_proj.weight.detach().numpy())


def test_row_reads_equal_whole_reads(tiny):
    weights = GGUFWeights(FileByteSource(tiny[3]))
    key = "model.layers.1.self_attn.k_proj.weight"
    whole = weights.read(key)
    for start, stop in [(0, 16), (16, 32), (3, 29), (31, 32)]:
        torch.testing.assert_close(weights.read_rows(key, start, stop), whole[start:stop], rtol=0, atol=0)
    assert weights.quantization(key) == "Q8_0"
    with pytest.raises(MissingTensorError, match="no tensor"):
        weights.read("model.layers.9.self_attn.k_proj.weight")


def test_atlas_of_gguf_equals_atlas_of_the_transformers_folder(tiny):
    _, folder, f32, _ = tiny
    ours, reference = pg.rotary_atlas(f32), pg.rotary_atlas(folder)
    for name in ("qk_share", "q_norm", "k_norm", "q_pair_cosine", "k_pair_cosine", "wavelengths"):
        torch.testing.assert_close(getattr(ours, name), getattr(reference, name), rtol=1e-6, atol=1e-9)
    config = dict(ours.provenance.config)
    assert config["quantization"] == ("F32",) and dict(config["gguf"])["architecture"] == "llama"
    assert json.loads(ours.to_json(allow_nan=False))["provenance"]["config"]["quantization"] == ["F32"]


def test_load_builds_the_rotary_table_from_gguf_metadata(tiny):
    _, folder, f32, _ = tiny
    table, reference = pg.load(f32), pg.load(folder)
    assert table.kind == "rotary" and table.shape == (256, 16)
    torch.testing.assert_close(table.matrix, reference.matrix, rtol=0, atol=0)
    assert "GGUF metadata" in table.provenance.source


def test_learned_table_from_a_gpt2_gguf(tmp_path):
    import gguf

    rng = np.random.default_rng(0)
    wpe = rng.standard_normal((32, 8)).astype(np.float32)
    writer = gguf.GGUFWriter(str(tmp_path / "g.gguf"), "gpt2")
    writer.add_block_count(1)
    writer.add_context_length(32)
    writer.add_embedding_length(8)
    writer.add_head_count(2)
    writer.add_tensor("position_embd.weight", wpe.astype(np.float16), raw_dtype=gguf.GGMLQuantizationType.F16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    table = pg.load(tmp_path / "g.gguf")
    assert table.kind == "learned" and table.shape == (32, 8)
    torch.testing.assert_close(table.matrix, torch.from_numpy(wpe.astype(np.float16).astype(np.float32)))
    assert table.provenance.original_dtype == "F16"


def test_config_renames_are_transformers_own_and_the_fallback_names_the_same_attributes():
    """transformers' renames are used where it has them; for the Llama family the fallback table names the
    same config attributes (so an architecture transformers does not know still gets standard fields)."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    from pos_geometry.sources.gguf.config import config_renames

    assert config_renames("gpt2", "gpt2") == GGUF_CONFIG_MAPPING["gpt2"]
    assert config_renames("gemma3", "gemma3_text") == GGUF_CONFIG_MAPPING["gemma3"]
    assert config_renames("somearch", "somearch") == CONFIG_FIELDS
    for arch in ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "stablelm"):
        for key, target in GGUF_CONFIG_MAPPING[arch].items():
            if key in CONFIG_FIELDS and target is not None and key != "rope.dimension_count":
                assert CONFIG_FIELDS[key] == target, (arch, key, target)


def test_permuted_architectures_are_those_transformers_unpermutes():
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, LlamaTensorProcessor

    assert {arch for arch, cls in TENSOR_PROCESSORS.items() if cls is LlamaTensorProcessor} == PERMUTED_QK


def _gguf_bytes(counts=(0, 0), body=b"") -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, *counts) + body


@pytest.mark.parametrize(
    "data, match",
    [
        (b"GGUX" + bytes(40), "not a GGUF file"),
        (_gguf_bytes((10**12, 1)), "more than its"),
        (_gguf_bytes((0, 1), struct.pack("<Q", 10**9) + b"k"), "truncated"),  # a key longer than the file
        (_gguf_bytes((0, 1), struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 9, 1)), "nests arrays"),
        (_gguf_bytes((0, 1), struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 10**15)), "truncated"),
        (b"GGUF" + struct.pack("<IQQ", 7, 0, 0), "version 7"),
        (_gguf_bytes((1, 0), struct.pack("<Q", 1) + b"t" + struct.pack("<I", 9)), "dimensions"),
    ],
)
def test_hostile_headers_raise_typed_errors(data, match):
    with pytest.raises(CheckpointFormatError, match=match):
        read_header(BytesSource(data + bytes(64)))


def test_tensor_past_the_end_is_refused():
    tensor = struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 32, 0, 10**6)  # F32 [32] at offset 1e6
    with pytest.raises(CheckpointFormatError, match="past the end"):
        read_header(BytesSource(_gguf_bytes((1, 0), tensor) + bytes(256)))


def test_real_smollm2_atlas_equals_transformers_own_gguf_loader(smollm2_gguf, tmp_path):
    """The q/k weights of the real file's first 4 layers, as pos_geometry reads them (only their bytes), are
    bit-identical to those transformers' GGUF loader builds from the same bytes, and so are the atlases."""
    from safetensors.torch import save_file

    cut = gguf_files.cut_gguf(smollm2_gguf, tmp_path / "cut.gguf", layers=4)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=cut.name, dtype=torch.float32
    )
    layers = [0, 1, 2, 3]
    ours = read_qk(smollm2_gguf, layers=layers)
    keys = {}
    for i in layers:
        attn = model.model.layers[i].self_attn
        torch.testing.assert_close(ours.q[i].reshape(-1, 576), attn.q_proj.weight.detach(), rtol=0, atol=0)
        torch.testing.assert_close(ours.k[i].reshape(-1, 576), attn.k_proj.weight.detach(), rtol=0, atol=0)
        keys[f"model.layers.{i}.self_attn.q_proj.weight"] = attn.q_proj.weight.detach().contiguous()
        keys[f"model.layers.{i}.self_attn.k_proj.weight"] = attn.k_proj.weight.detach().contiguous()
    folder = tmp_path / "hf"
    folder.mkdir()
    model.config.save_pretrained(folder)
    save_file(keys, folder / "model.safetensors")
    atlas, reference = pg.rotary_atlas(smollm2_gguf, layers=layers), pg.rotary_atlas(folder)
    for name in ("qk_share", "q_norm", "k_norm", "q_pair_cosine", "k_pair_cosine", "wavelengths"):
        torch.testing.assert_close(getattr(atlas, name), getattr(reference, name), rtol=1e-6, atol=1e-9)
    assert dict(atlas.provenance.config)["quantization"] == ("Q4_1",)
    assert atlas.shape == (4, 9, 32)


def test_gguf_model_equals_transformers_own_gguf_loader(smollm2_gguf, tmp_path):
    """pos_geometry's fast GGUF model loader gives transformers' loader's parameters, bit for bit, on the
    real file's bytes (its first 2 blocks), and so the same logits."""
    from pos_geometry.sources.gguf.model import fast_path_applies, gguf_model

    cut = gguf_files.cut_gguf(smollm2_gguf, tmp_path / "cut.gguf", layers=2)
    ours = gguf_model(cut)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(tmp_path), gguf_file=cut.name, dtype=torch.float32
    )
    # per-tensor processors (a permutation, gemma's norm offset) run tensor by tensor; expert merges do not
    assert fast_path_applies("llama") and fast_path_applies("gemma2") and not fast_path_applies("qwen2moe")
    theirs_state = theirs.state_dict()
    assert set(ours.state_dict()) == set(theirs_state)
    for key, value in ours.state_dict().items():
        torch.testing.assert_close(value, theirs_state[key], rtol=0, atol=0, msg=key)
    ids = torch.tensor([[1, 504, 3458, 282, 260, 1345, 30, 216]])
    with torch.no_grad():
        torch.testing.assert_close(ours.eval()(ids).logits, theirs.eval()(ids).logits, rtol=0, atol=0)


def test_rope_scaling_metadata_becomes_the_transformers_rope_config(tmp_path):
    """``{arch}.rope.scaling.type/factor`` (linear: position interpolation) scales every frequency, as
    transformers' linear rope type does."""
    import gguf

    model = _tiny_llama()
    plain = gguf_files.llama_to_gguf(model, tmp_path / "plain.gguf")
    writer = gguf_files._writer(tmp_path / "scaled.gguf", "llama", {
        "num_hidden_layers": 2, "max_position_embeddings": 256, "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 10000.0, "rms_norm_eps": 1e-6,
        "vocab_size": 64, "head_dim": 16,
    })  # fmt: skip
    writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    writer.add_rope_scaling_factor(4.0)
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), np.float32))
    gguf_files._finish(writer)
    scaled = GGUFWeights(FileByteSource(tmp_path / "scaled.gguf")).config
    # built by transformers' LlamaConfig, as a folder's config.json would read: v5 rope_parameters
    assert scaled["rope_parameters"] == {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}
    table, reference = pg.load(tmp_path / "scaled.gguf"), pg.load(plain)
    assert dict(table.provenance.config)["rope_type"] == "linear"
    # every plane turns at θ_i / 4: position 4 of the scaled table is position 1 of the plain one
    torch.testing.assert_close(table.matrix[4], reference.matrix[1], rtol=0, atol=1e-6)
