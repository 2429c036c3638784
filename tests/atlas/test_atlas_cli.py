"""``pos-geometry atlas``: figures and JSON per model, one summary line each, clean errors."""

from __future__ import annotations

import json

import transformers
from typer.testing import CliRunner

from pos_geometry import position_qk_atlas, rotary_atlas
from pos_geometry.cli import app

runner = CliRunner()


def test_atlas_writes_figures_and_json(tiny_model, tmp_path):
    _, folder = tiny_model("gpt_neox", tmp_path / "tiny-neox")
    out = tmp_path / "out"
    res = runner.invoke(app, ["atlas", str(folder), "--out", str(out), "--layers", "1", "--fold-norm"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "plotly.min.js",  # one shared copy beside the figures (the default of every command)
        "tiny-neox_atlas.html",
        "tiny-neox_atlas.json",
        "tiny-neox_usage.html",
    ]
    data = json.loads((out / "tiny-neox_atlas.json").read_text())
    expected = rotary_atlas(folder, layers=[1], fold_norm=True)
    assert data["qk_share"] == expected.qk_share.tolist()
    assert data["provenance"]["processing"] == ["fold_norm"]
    assert "1 layers × 4 heads × 4 planes" in res.output
    assert f"mean short-wavelength share {float(expected.short_share.mean()):.3f}" in res.output


def test_atlas_of_a_learned_table_model_is_its_qk_view(tmp_path):
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=16, vocab_size=20)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2ish")
    out = tmp_path / "out"
    res = runner.invoke(app, ["atlas", str(tmp_path / "gpt2ish"), "--out", str(out), "--layers", "1"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "gpt2ish_atlas.json",
        "gpt2ish_offsets.html",
        "gpt2ish_shares.html",
        "plotly.min.js",
    ]  # sorted: "g" < "p"
    data = json.loads((out / "gpt2ish_atlas.json").read_text())
    expected = position_qk_atlas(tmp_path / "gpt2ish", layers=[1])
    assert data["form_share"] == expected.form_share.tolist()
    assert data["offset_profile"] == expected.offset_profile.tolist()
    assert "learned table: 1 layers × 2 heads" in res.output
    assert "1 × 2" in str(expected) and "explained by the offset" in str(expected)
    bad = runner.invoke(
        app, ["atlas", str(tmp_path / "gpt2ish"), "--out", str(tmp_path / "o"), "--layers", "x"]
    )
    assert bad.exit_code == 1 and "--layers takes" in bad.output


def test_atlas_of_a_model_with_neither_is_one_clear_error(tmp_path):
    config = transformers.BloomConfig(hidden_size=32, n_layer=1, n_head=2, vocab_size=20)
    transformers.BloomForCausalLM(config).save_pretrained(tmp_path / "bloomish")
    res = runner.invoke(app, ["atlas", str(tmp_path / "bloomish"), "--out", str(tmp_path / "out" / "sub")])
    assert res.exit_code == 1
    assert "does not apply" in res.output and "ALiBi" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "out").exists()  # a failed run leaves no (empty) output folder


def test_atlas_folds_the_norm_by_default_as_the_reproduction_and_notebooks_do(tiny_model, tmp_path):
    _, folder = tiny_model("gpt_neox", tmp_path / "tiny-neox")
    folded = runner.invoke(app, ["atlas", str(folder), "--out", str(tmp_path / "a"), "--layers", "1"])
    raw = runner.invoke(
        app, ["atlas", str(folder), "--out", str(tmp_path / "b"), "--layers", "1", "--no-fold-norm"]
    )
    assert folded.exit_code == 0 and raw.exit_code == 0, folded.output + raw.output
    processing = [
        json.loads((tmp_path / d / "tiny-neox_atlas.json").read_text())["provenance"]["processing"]
        for d in "ab"
    ]
    assert processing == [["fold_norm"], []]
