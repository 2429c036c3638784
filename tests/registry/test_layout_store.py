"""Derived layouts on disk: read back equal, never from a damaged file, one derivation at a time, and the
layout transformers gives read first for every architecture (the table's row only where it cannot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import transformers

import pos_geometry.registry.derived_layout as derived_layout
from pos_geometry.encodings.rotary import inverse_frequencies, rotary_params
from pos_geometry.registry.architecture import attention_of
from pos_geometry.registry.attention import attention_layout
from pos_geometry.registry.derived_layout import LayoutUnavailable, derive_layout
from pos_geometry.registry.layout_store import layout_path


def _llama(**extra) -> dict:
    return transformers.LlamaConfig(
        hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
        num_hidden_layers=2, vocab_size=64, **extra,
    ).to_dict()  # fmt: skip


def _text(config: dict) -> str:
    return json.dumps(config, sort_keys=True, default=str)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty layout store and no layout derived in this process."""
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "cache"))
    derived_layout._stored_or_derived.cache_clear()
    yield tmp_path / "cache"
    derived_layout._stored_or_derived.cache_clear()


def test_a_derived_layout_is_stored_and_read_back_without_deriving(fresh, monkeypatch):
    config = _llama(rope_theta=500.0)
    first = derive_layout(config)
    path = layout_path(_text(config))
    assert path.is_file() and path.is_relative_to(fresh / "layouts")
    derived_layout._stored_or_derived.cache_clear()

    def refuse(_):
        raise AssertionError("derived again although a stored layout exists")

    monkeypatch.setattr(derived_layout, "_derive", refuse)
    assert derive_layout(config) == first
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


def test_another_config_is_another_file(fresh):
    a, b = _llama(rope_theta=500.0), _llama(rope_theta=5000.0)
    assert layout_path(_text(a)) != layout_path(_text(b))
    assert derive_layout(a).groups[0].theta != derive_layout(b).groups[0].theta


@pytest.mark.parametrize("damage", ["", "{not json", "[]", '{"answer": {}}', '{"answer": {"layout": 3}}'])
def test_a_damaged_file_is_derived_again_and_replaced(fresh, damage):
    config = _llama(rope_theta=700.0)
    good = derive_layout(config)
    path = layout_path(_text(config))
    path.write_text(damage, encoding="utf-8")
    derived_layout._stored_or_derived.cache_clear()
    assert derive_layout(config) == good
    assert json.loads(path.read_text(encoding="utf-8"))["answer"]["rotary_dim"] == good.rotary_dim


def test_frequencies_carry_the_configs_float64_digits(fresh):
    """The probe reads transformers' float32 angles (about 1e-7); the formula it confirms gives the digits."""
    config = _llama(rope_theta=10000.0)
    theta = derive_layout(config).groups[0].theta
    assert list(theta) == inverse_frequencies(rotary_params(config)).tolist()


def test_gemma3_layer_types_keep_their_own_float64_frequencies(fresh):
    config = transformers.Gemma3TextConfig(
        hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_hidden_layers=6, vocab_size=64, max_position_embeddings=512,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    ).to_dict()  # fmt: skip
    groups = {g.label: g.theta for g in derive_layout(config).groups}
    for label in ("sliding_attention", "full_attention"):
        assert list(groups[label]) == inverse_frequencies(rotary_params(config, layer_type=label)).tolist()


def test_derivations_in_threads_agree_with_one_alone(fresh):
    """The probe patches the modeling module: threads deriving at once used to read each other's calls."""
    configs = [
        transformers.GPTNeoXConfig(hidden_size=128, intermediate_size=64, num_attention_heads=4,
                                   num_hidden_layers=2, vocab_size=64, rotary_pct=0.25,
                                   rope_theta=float(base)).to_dict()
        for base in (100, 200, 300, 400, 500, 600)
    ]  # fmt: skip
    with ThreadPoolExecutor(6) as pool:
        together = list(pool.map(derive_layout, configs))
    derived_layout._stored_or_derived.cache_clear()
    for path in (fresh / "layouts").rglob("*.json"):
        path.unlink()
    assert together == [derive_layout(c) for c in configs]


def test_the_derived_layout_is_read_first_even_where_the_table_has_a_row(fresh):
    config = _llama()
    layout, derived = attention_of(config)
    assert derived is not None and layout == derived.layout
    assert layout.pairing == attention_layout(config).pairing


def test_the_row_stands_in_only_where_transformers_cannot_describe_the_model(fresh, monkeypatch):
    import pos_geometry.registry.architecture as architecture

    def unavailable(config):
        raise LayoutUnavailable("transformers cannot build this model")

    monkeypatch.setattr(architecture, "derive_layout", unavailable)
    layout, derived = attention_of(_llama())
    assert derived is None and layout == attention_layout(_llama())
    with pytest.raises(LayoutUnavailable, match="cannot build"):
        attention_of({**_llama(), "model_type": "falcon"})  # no row to stand in


def test_a_stored_layout_spares_importing_the_modeling_code(fresh):
    """What made a GGUF atlas slow: with the layout stored, transformers' modeling files are not imported."""
    config = _llama(rope_theta=900.0)
    derive_layout(config)
    code = textwrap.dedent(f"""
        import json, sys
        from pos_geometry.registry.architecture import attention_of
        layout, derived = attention_of(json.loads({json.dumps(json.dumps(config, default=str))}))
        assert derived is not None, "not the derived layout"
        loaded = sorted(m for m in sys.modules if m.startswith("transformers.models.") and ".modeling_" in m)
        print(json.dumps(loaded))
    """)
    env = {**os.environ, "POS_GEOMETRY_CACHE": str(fresh)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
