"""The GGUF parity matrix: every path gives the same answer on a model's folder and on its GGUF file.

The files in ``tests/data/gguf_parity`` were written by llama.cpp's own converter (``convert_hf_to_gguf.py``)
from tiny random transformers models saved beside them (``scripts/make_gguf_fixtures.py`` regenerates
them; ``provenance.json`` names the llama.cpp commit). At F32 the GGUF holds the folder's numbers, so
each path must agree: the config (built by transformers' config class from the metadata), ``load`` (or
the same refusal), ``rotary_atlas`` with and without ``fold_norm`` (per layer type where types rotate
differently), ``hidden_positions`` and ``intervene`` with ``SwapPairing``. At Q8_0 the oracle is
transformers' own GGUF loader on the same file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.interventions import SwapPairing
from pos_geometry.sources.byte_source import FileByteSource
from pos_geometry.sources.gguf.checkpoint import GGUFWeights

DATA = Path(__file__).resolve().parents[2] / "data" / "gguf_parity"
PROVENANCE = json.loads((DATA / "provenance.json").read_text())
ARCHS = sorted(PROVENANCE["models"])
LEARNED = ("bert", "gpt2")  # a decoder and an encoder with a learned table
ROTARY = [a for a in ARCHS if a not in LEARNED]
TOKENS = np.random.default_rng(0).integers(0, 256, size=(2, 24))
# fields a folder's config.json and a GGUF's metadata cannot share: names, ids of a tokenizer, dtype
_NOT_COMPARED = {"architectures", "dtype", "transformers_version", "_name_or_path", "gguf", "bos_token_id",
                 "eos_token_id", "pad_token_id"}  # fmt: skip


def _sources(arch: str, outtype: str = "f32") -> tuple[Path, Path]:
    return DATA / arch, DATA / f"{arch}-{outtype}.gguf"


def _both(fn, arch: str):
    """``fn`` on the folder and on the GGUF: both values, or both exceptions (type and message with the
    path taken out must agree)."""
    out = []
    for source in _sources(arch):
        try:
            out.append(fn(source))
        except pg.PosGeometryError as exc:
            out.append(exc)
    folder, gguf = out
    if isinstance(folder, Exception) or isinstance(gguf, Exception):
        assert type(folder) is type(gguf), (folder, gguf)
        strip = [re.sub(r"'[^']*gguf_parity[^']*'", "PATH", str(e)) for e in (folder, gguf)]
        assert strip[0] == strip[1]
        return None
    return folder, gguf


def test_the_fixtures_are_what_provenance_says():
    import hashlib

    assert PROVENANCE["converter"].startswith("convert_hf_to_gguf.py (llama.cpp)")
    assert re.fullmatch(r"[0-9a-f]{40}", PROVENANCE["llama_cpp_commit"])
    for arch, record in {**PROVENANCE["models"], **PROVENANCE.get("k_quants", {})}.items():
        for name, digest in record["sha256"].items():
            path = DATA / arch / name if name == "model.safetensors" else DATA / name
            assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path


@pytest.mark.parametrize("arch", ARCHS)
def test_the_gguf_config_is_the_folders_config(arch):
    """The metadata, through transformers' config class, gives the folder's config.json field for field
    (the class's defaults supply what llama.cpp does not write: Gemma-3's layer types and local base)."""
    folder, gguf = _sources(arch)
    theirs = transformers.AutoConfig.from_pretrained(folder).to_dict()
    ours = GGUFWeights(FileByteSource(gguf)).config
    assert ours["gguf"]["config_source"].startswith(f"transformers {transformers.__version__}'s")
    differ = {
        k: (theirs.get(k), ours.get(k)) for k in set(theirs) - _NOT_COMPARED if theirs.get(k) != ours.get(k)
    }
    assert not differ, differ


@pytest.mark.parametrize("arch", ARCHS)
def test_info_describes_the_same_model(arch):
    """``pos-geometry info``'s summary: the same kind, config fields and layer types (with each type's
    rotation and attention span) from the folder's config.json and from the GGUF's metadata."""
    folder, gguf = (pg.describe_checkpoint(s) for s in _sources(arch))
    assert (gguf.kind, gguf.position_key is None) == (folder.kind, folder.position_key is None)
    shown = {k: v for k, v in folder.config.items() if k not in _NOT_COMPARED}
    assert {k: gguf.config.get(k) for k in shown} == shown
    assert gguf.layer_types == folder.layer_types
    if arch == "gemma3":
        assert gguf.layer_types == (
            ("sliding_attention", "layers 0-4", "base 10000; attends window 32"),
            ("full_attention", "layers 5", "base 1e+06; attends full context 256"),
        )
    assert "Config from the GGUF metadata" in gguf.config_source


@pytest.mark.parametrize("arch", ARCHS)
def test_load_is_the_same_table_or_the_same_refusal(arch):
    both = _both(lambda s: pg.load(s).matrix, arch)
    if arch == "gemma3":  # two bases: refused without layer_type, each type's table with it
        assert both is None
        for kind in ("sliding_attention", "full_attention"):
            folder, gguf = (pg.load(s, layer_type=kind) for s in _sources(arch))
            torch.testing.assert_close(gguf.matrix, folder.matrix, rtol=0, atol=0)
            assert gguf.provenance.config_dict["layer_type"] == kind
        local = pg.load(_sources(arch)[1], layer_type="sliding_attention").provenance.config_dict
        assert local["rope_parameters.rope_theta"] == 10000.0  # the file's rope.freq_base_swa
        return
    folder, gguf = both
    torch.testing.assert_close(gguf, folder, rtol=0, atol=0)


def _atlases(arch: str, fold_norm: bool) -> list[tuple[pg.RotaryAtlas, pg.RotaryAtlas]]:
    kinds = ("sliding_attention", "full_attention") if arch == "gemma3" else (None,)
    return [
        tuple(pg.rotary_atlas(s, fold_norm=fold_norm, layer_type=kind) for s in _sources(arch))
        for kind in kinds
    ]


@pytest.mark.parametrize("fold_norm", [False, True], ids=["weights", "fold_norm"])
@pytest.mark.parametrize("arch", ROTARY)
def test_the_atlas_is_the_same(arch, fold_norm):
    """Shares to 1e-6 (the converter stores Gemma's norm gains with the 1 added; read back through
    transformers' tensor processor, the offset is counted once)."""
    for folder, gguf in _atlases(arch, fold_norm):
        for name in ("qk_share", "q_norm", "k_norm", "wavelengths"):
            torch.testing.assert_close(getattr(gguf, name), getattr(folder, name), rtol=1e-6, atol=1e-9)
        assert gguf.layers == folder.layers and gguf.layer_type == folder.layer_type


@pytest.mark.parametrize("arch", LEARNED)
def test_the_learned_models_have_no_atlas_on_either_source(arch):
    assert _both(lambda s: pg.rotary_atlas(s), arch) is None


@pytest.mark.parametrize("arch", LEARNED)
def test_attention_by_offset_is_the_same_with_the_null_of_its_direction(arch):
    """The encoder attends both ways on both sources (negative offsets, the uniform reference over every key);
    the decoder only backwards; per-plane usage does not apply to a learned table, for the same reason."""
    folder, gguf = _both(
        lambda s: pg.attention_by_offset(s, TOKENS, seq_len=24, device="cpu", progress=None), arch
    )
    np.testing.assert_array_equal(gguf.offsets, folder.offsets)
    np.testing.assert_allclose(gguf.mean_probability, folder.mean_probability, rtol=1e-4, atol=1e-6)
    assert (folder.offsets.min() < 0) == (arch == "bert")
    assert gguf.rotary_status == folder.rotary_status and folder.rotary_status.startswith("does not apply")


def test_an_encoder_is_measured_with_its_masked_token_loss_where_its_head_is():
    """BERT's folder holds its masked-LM head: the loss is the masked-token loss, with the mask token of its own
    tokenizer. llama.cpp's converter keeps no head: the GGUF refuses the loss, saying so, before any pass."""
    folder, gguf = _sources("bert")
    result = pg.intervene(folder, TOKENS + 5, pg.interventions.ShuffleRows(), attention=False, seq_len=24,
                          n_bootstrap=20, device="cpu", progress=None)  # fmt: skip
    assert result.objective == "masked-token" and abs(result.delta) > 1e-6  # the edit changed the loss
    assert result.base_loss_by_position.shape == (24,)
    assert "masked-token loss: 4 of 24 positions" in result.provenance.processing[0]
    assert "(id 4)" in result.provenance.processing[0]  # the tokenizer's [MASK]
    with pytest.raises(pg.MissingTensorError, match="holds no masked-token head"):
        pg.intervene(
            gguf, TOKENS + 5, pg.interventions.ShuffleRows(), seq_len=24, device="cpu", progress=None
        )


@pytest.mark.parametrize("arch", ARCHS)
def test_hidden_states_are_the_same(arch):
    folder, gguf = _both(
        lambda s: pg.hidden_positions(s, TOKENS, seq_len=24, device="cpu", progress=None), arch
    )
    for name, values in folder.metrics.items():
        np.testing.assert_allclose(gguf.metrics[name], values, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("arch", ROTARY)
def test_per_plane_attention_usage_is_the_same(arch):
    """The hidden-state path's per-plane usage reads the resolved architecture on both sources (per layer
    type where types rotate differently: Gemma-2/3's wavelengths come per block)."""
    both = _both(lambda s: pg.attention_by_offset(s, TOKENS, seq_len=24, device="cpu", progress=None), arch)
    if arch == "gemma2":
        assert both is None  # soft-capped logits: the same refusal, with its reason, on either source
        return
    folder, gguf = both
    assert folder.rotary_status == gguf.rotary_status == "measured", (
        folder.rotary_status,
        gguf.rotary_status,
    )
    np.testing.assert_allclose(gguf.plane_usage, folder.plane_usage, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(gguf.wavelengths, folder.wavelengths, rtol=1e-12)
    np.testing.assert_allclose(gguf.mean_probability, folder.mean_probability, rtol=1e-4, atol=1e-6)
    assert np.allclose(folder.plane_usage.sum(axis=-1), 1.0)


@pytest.mark.parametrize("arch", [a for a in ARCHS if a != "bert"])  # (the encoder's GGUF has no loss: above)
def test_the_pairing_swap_costs_the_same(arch):
    both = _both(
        lambda s: pg.intervene(
            s, TOKENS, SwapPairing(), attention=False, seq_len=24, n_bootstrap=20, device="cpu"
        ),
        arch,
    )
    if arch == "gpt2":
        assert both is None  # a learned table: the edit does not apply, on either source
        return
    folder, gguf = both
    assert abs(gguf.delta - folder.delta) < 1e-5 and abs(gguf.base_loss - folder.base_loss) < 1e-5
    assert abs(folder.delta) > 1e-6  # the swap changed the model (a random model barely uses position)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma2", "gemma3", "phi3", "stablelm", "starcoder2"])
def test_quantised_files_read_as_transformers_own_gguf_loader_reads_them(arch):
    """At Q8_0, pos_geometry's model (every tensor through transformers' tensor processor, config from the
    config class) has transformers' own ``from_pretrained(gguf_file=...)`` parameters, bit for bit."""
    from pos_geometry.sources.gguf.model import gguf_model

    path = _sources(arch, "q8_0")[1]
    ours = gguf_model(path).state_dict()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).state_dict()
    assert set(ours) == set(theirs)
    for key, value in ours.items():
        torch.testing.assert_close(value, theirs[key], rtol=0, atol=0, msg=key)
    weights = GGUFWeights(FileByteSource(path))
    assert (
        weights.quantization(next(k for k in weights.keys if re.match(r"blk\.0\.attn_(q|qkv)\.weight", k)))
        == "Q8_0"
    )


@pytest.mark.parametrize(
    "arch, field, value",
    [("qwen3", "head_dim", 8), ("gpt2", "n_positions", 256)],
)
def test_fields_transformers_own_loader_misses_are_read(arch, field, value):
    """transformers' GGUF renames leave out Qwen3's ``attention.key_length`` and map GPT-2's context length
    to ``n_ctx`` only, so its own loader builds the class's default head size (128) or table length (1024)
    and cannot load these files; pos_geometry reads the fields by gguf's own key names."""
    path = _sources(arch, "q8_0")[1]
    assert GGUFWeights(FileByteSource(path)).config[field] == value
    with pytest.raises(RuntimeError, match="mismatch"):
        transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32
        )


def test_starcoder2_rope_base_is_the_files():
    """transformers' GGUF renames for Starcoder2 have no ``rope.freq_base``: its own loader builds the
    class default (10000) where the file says 100000. pos_geometry reads the file's."""
    path = _sources("starcoder2")[1]
    assert GGUFWeights(FileByteSource(path)).config["rope_parameters"]["rope_theta"] == 100000.0
    theirs = transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    assert theirs.rope_parameters["rope_theta"] == 10000.0


@pytest.mark.parametrize("arch, layer_type", [("gemma2", None), ("gemma3", "sliding_attention"),
                                              ("gemma3", "full_attention")])  # fmt: skip
def test_the_short_long_split_uses_each_layers_attention_span(arch, layer_type):
    """A sliding-window layer never sees an offset past its window, so a plane is short-range for it when
    it completes a cycle within the window, not within the context (from the config, independently)."""
    config = json.loads((DATA / arch / "config.json").read_text())
    for source in _sources(arch):
        atlas = pg.rotary_atlas(source, layer_type=layer_type)
        expected = tuple(
            config["sliding_window"] if config["layer_types"][i] == "sliding_attention"
            else config["max_position_embeddings"] for i in atlas.layers
        )  # fmt: skip
        assert atlas.spans == expected
        for row, span in enumerate(expected):
            keep = atlas.wavelengths.numpy() <= span
            np.testing.assert_allclose(
                atlas.short_share[row].numpy(), atlas.qk_share[row].numpy()[:, keep].sum(-1)
            )
        if len(set(expected)) == 1:  # one span: the critical dimension is the span's
            assert atlas.critical_dimension == 2 * int((atlas.wavelengths <= expected[0]).sum())


K_QUANTS = sorted(PROVENANCE.get("k_quants", {}))


@pytest.mark.parametrize("name", K_QUANTS)
def test_k_quant_files_read_as_transformers_own_gguf_loader_reads_them(name, tmp_path):
    """Q4_K_M files written by llama.cpp's own ``llama-quantize`` (Q4_K and Q6_K blocks): pos_geometry's model
    has transformers' own loader's parameters bit for bit, and the atlas of the file (with ``fold_norm``,
    Gemma's norms included) is the atlas of the folder transformers' loader builds from the same bytes."""
    from pos_geometry.sources.gguf.model import gguf_model

    path = DATA / f"{name}-q4_k_m.gguf"
    weights = GGUFWeights(FileByteSource(path))
    assert {"Q4_K", "Q6_K"} <= {weights.quantization(k) for k in weights.keys if k.startswith("blk.")}
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    ours = gguf_model(path).state_dict()
    for key, value in theirs.state_dict().items():
        torch.testing.assert_close(ours[key], value, rtol=0, atol=0, msg=key)
    from safetensors.torch import save_file

    theirs.config.save_pretrained(tmp_path)  # transformers will not save a GGUF-loaded model itself
    save_file(
        {k: v.detach().clone().contiguous() for k, v in theirs.state_dict().items()},
        tmp_path / "model.safetensors",
    )
    for fold_norm in (False, True):
        folder, gguf = (
            pg.rotary_atlas(tmp_path, fold_norm=fold_norm),
            pg.rotary_atlas(path, fold_norm=fold_norm),
        )
        torch.testing.assert_close(gguf.qk_share, folder.qk_share, rtol=1e-6, atol=1e-9)
        assert "Q4_K" in gguf.provenance.config_dict["quantization"]
