"""The reproduction's rotary section on a tiny GPT-NeoX checkpoint: given by path, or found in the HF cache."""

from __future__ import annotations

import os
import shutil

import plotly.graph_objects as go
import torch
import transformers

from pos_geometry import rotary_atlas
from pos_geometry.reproduction.atlas_section import atlas_section

COMMIT = "a" * 40


def _tiny_neox(folder):
    config = transformers.GPTNeoXConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=2, rotary_pct=0.25,
        max_position_embeddings=256, vocab_size=50,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.GPTNeoXForCausalLM(config).save_pretrained(folder)
    return folder


def test_a_given_checkpoint_is_read_and_a_missing_model_is_named(tmp_path):
    folder = _tiny_neox(tmp_path / "neox")
    section = atlas_section(
        ["pythia-160m", "mistral-7b-v0.1"], paths={"pythia-160m": folder}, real_model=False
    )
    expected = rotary_atlas(folder)
    torch.testing.assert_close(section.atlases["pythia-160m"].qk_share, expected.qk_share, rtol=0, atol=0)
    assert section.atlases["pythia-160m"].provenance.model_id == "pythia-160m"
    assert set(section.atlases) == {"pythia-160m"}
    assert section.missing == {"mistral-7b-v0.1": "pos-geometry atlas mistral-7b-v0.1 --out atlas --online"}
    assert sorted(section.figures) == ["atlas_pythia-160m", "atlas_usage_pythia-160m"]
    heatmap, caption = section.figures["atlas_pythia-160m"]
    assert isinstance(heatmap, go.Figure) and "pythia-160m" in caption
    assert heatmap.data[0].z.shape == (2 * 4, 2)  # (layer, head) rows × 2 planes (25% of head_dim 16)
    text = section.markdown
    assert text.startswith("## How the rotary models use position")
    assert "2 layers × 4 heads × 2 rotation planes" in text
    assert f"critical dimension {expected.critical_dimension}" in text
    assert f"mean {float(expected.short_share.mean()):.3f}" in text
    assert "mistral-7b-v0.1" in text and "--online" in text


def test_a_model_in_the_hf_cache_is_found_offline(tmp_path, monkeypatch):
    from huggingface_hub import constants

    folder = _tiny_neox(tmp_path / "neox")
    monkeypatch.setattr(
        constants, "HF_HUB_CACHE", str(tmp_path / "hf")
    )  # read at import time by huggingface_hub
    repo = str(tmp_path / "hf" / "models--EleutherAI--pythia-160m")
    snapshot = f"{repo}/snapshots/{COMMIT}"
    os.makedirs(snapshot)
    os.makedirs(f"{repo}/refs")
    with open(f"{repo}/refs/main", "w") as fh:
        fh.write(COMMIT)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folder / name, f"{snapshot}/{name}")
    section = atlas_section(["pythia-160m"], real_model=False)
    assert section.missing == {}
    assert section.atlases["pythia-160m"].provenance.commit == COMMIT
    torch.testing.assert_close(section.atlases["pythia-160m"].qk_share, rotary_atlas(folder).qk_share)
    assert "local cache" in section.where["pythia-160m"]


def test_the_real_smollm2_atlas_is_shown_with_the_barbero_comparison(smollm2_gguf):
    section = atlas_section([], layers=[0, 1, 2])
    atlas = section.atlases["SmolLM2-135M-Instruct"]
    expected = rotary_atlas(smollm2_gguf, layers=[0, 1, 2], fold_norm=True)
    torch.testing.assert_close(atlas.qk_share, expected.qk_share, rtol=0, atol=0)
    assert sorted(section.figures) == [
        "atlas_SmolLM2-135M-Instruct", "atlas_short_SmolLM2-135M-Instruct", "atlas_usage_SmolLM2-135M-Instruct",
    ]  # fmt: skip
    usage = expected.layer_usage.mean(dim=0)
    assert f"the 8 slowest planes hold {float(usage[-8:].sum()):.2f}" in section.markdown
    assert (
        "Barbero et al." in section.markdown
        and "real trained weights" in section.where["SmolLM2-135M-Instruct"]
    )
