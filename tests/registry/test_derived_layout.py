"""Layouts derived from transformers: equal to the hand-written rows, right on multi-RoPE and NoPE models,
and checked against each model's own attention (the planted-plane check, generalised).

``test_every_rotary_architecture`` walks every causal-LM ``model_type`` of the installed transformers whose
modeling file has a rotary embedding (about 130; ~2 min): it is deselected by default (``-m exhaustive``
runs it) and its count is in docs/guide/rotary.md.
"""

from __future__ import annotations

import dataclasses
import importlib
import json

import _pos_geometry_tests_planted as planted
import numpy as np
import pytest
import torch
import transformers

from pos_geometry import rotary_atlas
from pos_geometry.registry.attention import ATTENTION_LAYOUTS, attention_layout
from pos_geometry.registry.derived_layout import LayoutUnavailable, derive_layout

_SMALL = {"num_hidden_layers": 2, "vocab_size": 64}
CONFIGS = {  # tiny configs of the architectures that also have a hand-written row
    "llama": lambda: transformers.LlamaConfig(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                              num_key_value_heads=2, **_SMALL),
    "mistral": lambda: transformers.MistralConfig(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                                  num_key_value_heads=2, **_SMALL),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(hidden_size=128, intermediate_size=64, num_attention_heads=4,
                                                   rotary_pct=0.25, **_SMALL),
    "gptj": lambda: transformers.GPTJConfig(n_embd=64, n_head=4, rotary_dim=8, n_layer=2, vocab_size=64),
    "phi3": lambda: transformers.Phi3Config(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                            num_key_value_heads=2, pad_token_id=0, **_SMALL),
    "qwen3": lambda: transformers.Qwen3Config(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                              num_key_value_heads=2, head_dim=16, **_SMALL),
    "olmo2": lambda: transformers.Olmo2Config(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                              num_key_value_heads=2, **_SMALL),
    "gemma": lambda: transformers.GemmaConfig(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                              num_key_value_heads=2, head_dim=16, **_SMALL),
    "mixtral": lambda: transformers.MixtralConfig(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                                  num_key_value_heads=2, num_local_experts=2, **_SMALL),
    "qwen2": lambda: transformers.Qwen2Config(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                              num_key_value_heads=2, **_SMALL),
    "qwen2_moe": lambda: transformers.Qwen2MoeConfig(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                                     num_key_value_heads=2, num_experts=2,
                                                     moe_intermediate_size=32,
                                                     shared_expert_intermediate_size=32, **_SMALL),
    "granite": lambda: transformers.GraniteConfig(hidden_size=64, intermediate_size=64, num_attention_heads=4,
                                                  num_key_value_heads=2, **_SMALL),
    "starcoder2": lambda: transformers.Starcoder2Config(hidden_size=64, intermediate_size=64,
                                                        num_attention_heads=4, num_key_value_heads=2, **_SMALL),
}  # fmt: skip


def test_every_row_of_the_layout_table_is_checked_against_transformers():
    assert sorted(CONFIGS) == sorted(ATTENTION_LAYOUTS)


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_derived_layout_equals_the_hand_written_row(arch):
    """The rows are the derivation's oracle: every field of each equals what transformers gives."""
    config = CONFIGS[arch]().to_dict()
    assert dataclasses.asdict(derive_layout(config).layout) == dataclasses.asdict(attention_layout(config))


def _gemma3(num_hidden_layers: int = 6) -> transformers.Gemma3TextConfig:
    return transformers.Gemma3TextConfig(
        hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_hidden_layers=num_hidden_layers, vocab_size=64, max_position_embeddings=512,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    )  # fmt: skip


def test_gemma3_local_and_global_layers_get_their_own_frequencies():
    derived = derive_layout(_gemma3().to_dict())
    groups = {g.label: g for g in derived.groups}
    assert set(groups) == {"sliding_attention", "full_attention"}
    assert groups["full_attention"].layers == (5,) and groups["sliding_attention"].layers == (0, 1, 2, 3, 4)
    for label, base in (("sliding_attention", 10.0), ("full_attention", 10000.0)):
        expected = base ** (-np.arange(0, 16, 2) / 16)  # the textbook θ_i, computed here
        np.testing.assert_allclose(groups[label].theta, expected, rtol=1e-6)
    assert derived.layout.norm_offset == 1.0 and derived.layout.qk_norm_offset == 1.0  # Gemma's 1 + w


def test_llama4_nope_layers_are_marked_and_left_out(tmp_path):
    config = transformers.Llama4TextConfig(
        hidden_size=64, intermediate_size=64, intermediate_size_mlp=64, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, num_hidden_layers=4, vocab_size=64, num_local_experts=2,
    )  # fmt: skip
    derived = derive_layout(config.to_dict())
    assert derived.unrotated == tuple(i for i, rope in enumerate(config.no_rope_layers) if not rope) == (3,)
    assert derived.layout.pairing == "interleaved"  # Llama-4 rotates adjacent pairs (complex frequencies)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    atlas = rotary_atlas(tmp_path)
    assert atlas.layers == (0, 1, 2) and atlas.unrotated_layers == (3,)
    assert "layers with no rotation" in atlas.summary()
    data = json.loads(atlas.to_json(allow_nan=False))  # strict JSON
    assert data["unrotated_layers"] == [3] and data["provenance"]["config"]["layout"].startswith(
        "derived from"
    )


def _logit_period(model, layer: int, head: int, n: int, dtype: torch.dtype = torch.float64) -> float:
    return planted.logit_period(model, layer, head, n, dtype)


@pytest.mark.parametrize("layer, plane", [(0, 2), (5, 3)])
def test_gemma3_planted_plane_oscillates_at_the_atlas_wavelength_of_its_layer_type(tmp_path, layer, plane):
    """A plane planted in a local (layer 0) or global (layer 5) layer: transformers' own logits oscillate
    at the wavelength the atlas gives that plane for that layer's type."""
    config = _gemma3()
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    attn = model.model.layers[layer].self_attn
    with torch.no_grad():
        for proj, head in ((attn.q_proj, 2), (attn.k_proj, 1)):
            proj.weight[torch.tensor([plane, plane + 8]) + 16 * head] *= 40.0
    model.save_pretrained(tmp_path)
    atlas = rotary_atlas(tmp_path, layers=[layer])
    assert atlas.dominant_plane[0, 2] == plane
    period = _logit_period(model, layer, 2, 256)
    assert period == pytest.approx(float(atlas.wavelengths[plane]), rel=0.03)
    assert atlas.layer_type == ("full_attention" if layer == 5 else "sliding_attention")


def _rotary_causal_lm_types() -> list[str]:
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    found = []
    for model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        if model_type not in CONFIG_MAPPING:
            continue
        package = CONFIG_MAPPING[model_type].__module__.split(".")[-2]
        try:
            modeling = importlib.import_module(f"transformers.models.{package}.modeling_{package}")
        except Exception:
            continue
        if any("RotaryEmbedding" in name for name in dir(modeling)):
            found.append(model_type)
    return found


@pytest.mark.exhaustive
def test_every_rotary_architecture_is_derived_or_refused_with_a_reason():
    from transformers import CONFIG_MAPPING

    passed, refused = [], {}
    for model_type in _rotary_causal_lm_types():
        try:
            config = CONFIG_MAPPING[model_type](num_hidden_layers=4)
        except Exception as exc:
            refused[model_type] = f"its default config cannot be built with 4 layers: {exc}"
            continue
        try:
            derived = derive_layout(config.to_dict())
        except LayoutUnavailable as exc:
            assert str(exc), model_type
            refused[model_type] = str(exc)
            continue
        assert derived.groups and derived.rotary_dim > 0
        passed.append(model_type)
    print(f"derived: {len(passed)}, refused: {len(refused)}")
    for model_type, why in sorted(refused.items()):
        print(f"  {model_type}: {why[:160]}")
    assert len(passed) >= 88


def _tiny_derived_instances(tmp_path):
    """``(model_type, folder)`` for a saved tiny instance of every architecture the atlas derives, or
    ``(model_type, why)`` when transformers cannot save one."""
    from transformers import CONFIG_MAPPING

    from pos_geometry.registry.rotation_probe import shrunk

    for model_type in _rotary_causal_lm_types():
        try:
            config = CONFIG_MAPPING[model_type](num_hidden_layers=4)
            derive_layout(config.to_dict())
        except Exception:
            continue  # not derived: the walk above lists why
        folder = tmp_path / model_type
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                text = config.get_text_config() if hasattr(config, "get_text_config") else config
                transformers.AutoModelForCausalLM.from_config(shrunk(text)).save_pretrained(folder)
        except Exception as exc:
            yield model_type, f"a tiny instance cannot be saved: {exc}"
            continue
        yield model_type, folder


@pytest.mark.exhaustive
def test_every_derived_architecture_takes_the_rotary_edits(tmp_path):
    """``intervene`` runs the pairing swap and a plane removal on a tiny instance of every architecture the
    atlas derives (or says why an edit does not apply), and the swap changes the model's loss."""

    from pos_geometry import intervene
    from pos_geometry.errors import NotApplicableError
    from pos_geometry.interventions import RemovePlanes, SwapPairing

    ran, refused, failed = [], {}, {}
    tokens = np.arange(2, 18)[None] % 64
    for model_type, folder in _tiny_derived_instances(tmp_path):
        if isinstance(folder, str):
            refused[model_type] = folder
            continue
        try:
            for edit in (SwapPairing(), RemovePlanes(fastest=1)):
                result = intervene(folder, tokens, edit, attention=False, device="cpu", n_bootstrap=10)
                assert np.isfinite(result.delta), (model_type, edit)
            ran.append(model_type)
        except NotApplicableError as exc:
            refused[model_type] = str(exc)
        except Exception as exc:
            failed[model_type] = f"{type(exc).__name__}: {exc}"
    print(f"edits ran: {len(ran)}, do not apply: {len(refused)}, failed: {len(failed)}")
    for model_type, why in sorted({**refused, **failed}.items()):
        print(f"  {model_type}: {why[:200]}")
    assert not failed


@pytest.mark.exhaustive
def test_every_derived_architecture_has_its_per_plane_attention_usage_measured(tmp_path):
    """The hidden-state path's per-plane usage on a tiny instance of every architecture the atlas derives: each
    block's wavelengths are its layer type's (the derived description's), and the usage sums to 1 per head; an
    architecture whose attention the probe cannot read says why (no silent fallback)."""

    import pos_geometry as pg
    from pos_geometry.registry.architecture import describe_architecture

    measured, refused, failed = [], {}, {}
    tokens = np.arange(2, 18)[None].repeat(2, 0) % 64
    for model_type, folder in _tiny_derived_instances(tmp_path):
        if isinstance(folder, str):
            refused[model_type] = folder
            continue
        try:
            att = pg.attention_by_offset(folder, tokens, device="cpu", progress=None)
        except pg.PosGeometryError as exc:
            refused[model_type] = f"{type(exc).__name__}: {exc}"
            continue
        except Exception as exc:
            failed[model_type] = f"{type(exc).__name__}: {exc}"
            continue
        if att.rotary_status != "measured":
            assert att.rotary_status.startswith("does not apply: "), (model_type, att.rotary_status)
            refused[model_type] = att.rotary_status
            continue
        usage = att.plane_usage[np.isfinite(att.plane_usage).all(-1)]
        assert usage.size and np.allclose(usage.sum(-1), 1.0), model_type
        described = describe_architecture(json.loads((folder / "config.json").read_text()))
        waves = np.atleast_2d(att.wavelengths)
        assert waves.shape[-1] == att.plane_usage.shape[-1], model_type
        if waves.shape[0] > 1:  # per block: one row per layer type, and types that rotate alike agree
            by_type: dict = {}
            for row, layer in zip(waves, att.layers, strict=True):
                kind = described.layer_type_of(layer)
                np.testing.assert_allclose(row, by_type.setdefault(kind.label, row), err_msg=model_type)
            unrotated = any(described.layer_type_of(b).rotary is None for b in att.layers)  # NaN rows
            assert described.rotates_by_type() or unrotated, model_type
        measured.append(model_type)
    print(f"per-plane usage measured: {len(measured)}, does not apply: {len(refused)}, failed: {len(failed)}")
    for model_type, why in sorted({**refused, **failed}.items()):
        print(f"  {model_type}: {why[:200]}")
    assert not failed
    assert len(measured) >= 80


def test_load_lists_the_layers_a_rotary_table_does_not_apply_to(tmp_path):
    import pos_geometry as pg

    config = transformers.SmolLM3Config(
        hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=8,
        vocab_size=64, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    (tmp_path / "config.json").write_text(config.to_json_string())
    table = pg.load(tmp_path)
    nope = tuple(i for i, rotates in enumerate(config.no_rope_layers) if not rotates)
    assert (
        nope
        and dict(table.provenance.config)["layers without rotation (NoPE; this table does not apply to them)"]
        == nope
    )
    assert derive_layout(config.to_dict()).unrotated == nope  # transformers' own forward agrees


def test_deriving_leaves_the_callers_random_stream_alone():
    config = CONFIGS["mistral"]().to_dict()
    config["num_hidden_layers"] = 3  # not cached by an earlier test
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    derive_layout(config)
    torch.testing.assert_close(torch.rand(3), expected)


@pytest.mark.parametrize("plane", [0, 1])
def test_gated_queries_are_read_from_the_query_half_of_each_head(tmp_path, plane):
    """Qwen3-Next's q_proj gives each head ``[query | gate]``: a plane planted in head 2's query half is the
    atlas's dominant plane for that head, and transformers' own logits oscillate at its wavelength."""
    config = planted.qwen3_next_config()
    config._attn_implementation = "eager"
    derived = derive_layout(config.to_dict())
    assert derived.layout.q_gate and derived.unrotated == (0, 1, 2)  # linear-attention layers do not rotate
    from pos_geometry.registry.architecture import describe_architecture

    kinds = describe_architecture(config.to_dict()).layer_types
    assert [(t.label, t.layers, t.rotary is None) for t in kinds] == [
        ("linear_attention", (0, 1, 2), True),
        ("full_attention", (3,), False),
    ]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    attn = model.model.layers[3].self_attn
    with torch.no_grad():  # rotary_dim 8: plane i turns dims (i, i + 4); head 2's query rows start at 2·2·16
        attn.q_proj.weight[torch.tensor([plane, plane + 4]) + 2 * 2 * 16] *= 60.0
        attn.k_proj.weight[torch.tensor([plane, plane + 4]) + 1 * 16] *= 60.0
    model.save_pretrained(tmp_path)
    atlas = rotary_atlas(tmp_path)
    assert atlas.layers == (3,) and atlas.unrotated_layers == (0, 1, 2)
    assert atlas.dominant_plane[0, 2] == plane and atlas.qk_share[0, 2, plane] > 0.9
    # the only attention layer: the only attention map returned (its MoE runs in float32 only)
    period = _logit_period(model, 0, 2, 256, torch.float32)
    assert period == pytest.approx(float(atlas.wavelengths[plane]), rel=0.03)
