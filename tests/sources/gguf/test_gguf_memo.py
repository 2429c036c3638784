"""What a GGUF read remembers: the built config and the tensor processor's effect, equal to computing them
again, and a second read that imports nothing of transformers; a processor that does anything else runs
every time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import _pos_geometry_tests_gguf_files as gguf_files
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.sources.byte_source import FileByteSource
from pos_geometry.sources.gguf.checkpoint import GGUFWeights

KEYS = ("model.layers.1.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
        "model.layers.1.input_layernorm.weight")  # fmt: skip


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=2, vocab_size=64, max_position_embeddings=256,
    )  # fmt: skip
    torch.manual_seed(3)
    model = transformers.LlamaForCausalLM(config).eval()
    return model, gguf_files.llama_to_gguf(model, tmp_path_factory.mktemp("memo") / "tiny.gguf", "F32")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _read(path):
    weights = GGUFWeights(FileByteSource(path))
    return weights.config, {key: weights.read(key) for key in KEYS} | {
        "rows": weights.read_rows(KEYS[0], 16, 48)
    }


def test_a_second_read_is_the_first_and_is_the_models_weights(gguf, cache):
    model, path = gguf
    config, first = _read(path)
    assert {p.parent.parent.name for p in cache.rglob("*.json")} == {
        "gguf_configs",
        "gguf_processors",
        "gguf_effects",
    }
    again_config, again = _read(path)  # from what the first read remembered
    assert again_config == config and isinstance(next(iter(config["id2label"])), int)
    state = model.state_dict()
    for key in KEYS:
        assert torch.equal(again[key], first[key])
        torch.testing.assert_close(again[key], state[key], rtol=0, atol=0)
    assert torch.equal(again["rows"], state[KEYS[0]][16:48])


def test_a_remembered_read_imports_no_transformers(gguf, cache):
    _, path = gguf
    before = pg.rotary_atlas(path)
    code = textwrap.dedent(f"""
        import json, sys
        import pos_geometry as pg
        atlas = pg.rotary_atlas({str(path)!r})
        print(json.dumps([atlas.qk_share.tolist(), sorted(m for m in sys.modules if m.startswith("transformers"))]))
    """)
    env = {**os.environ, "POS_GEOMETRY_CACHE": str(cache)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    shares, imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert imported == []
    assert torch.equal(torch.tensor(shares, dtype=before.qk_share.dtype), before.qk_share)


def test_a_processor_that_does_something_else_runs_every_time(gguf, cache, monkeypatch):
    from transformers import modeling_gguf_pytorch_utils as utils

    class Doubling(utils.TENSOR_PROCESSORS["llama"]):
        def process(self, weights, name, **kwargs):
            out = super().process(weights, name, **kwargs)
            return out._replace(weights=out.weights * 2)

    Doubling.__name__ = "LlamaTensorProcessor"  # (the permutation is still its own)
    monkeypatch.setitem(utils.TENSOR_PROCESSORS, "llama", Doubling)
    model, path = gguf
    state = model.state_dict()
    for _ in range(2):
        _, read = _read(path)
        for key in KEYS:
            torch.testing.assert_close(read[key], 2 * state[key], rtol=0, atol=0)
    assert not list((cache / "gguf_effects").rglob("*.json"))
