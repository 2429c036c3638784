"""Models of every kind a card reads, built here by transformers (random weights), and their cards, made once.

``learned``: a GPT-2 LM (context 48) whose table is scaled up so position matters; ``rotary``: a Llama
(head_dim 8, base 500, context 128) with sharp attention; ``per_type``: the Gemma-3 folder of
``tests/data/gguf_parity`` (sliding layers base 1e4, window 32; a full layer base 1e6); ``no_table``: a
Bloom (ALiBi: no table, learned or rotary); ``table_file``: a helix written as a bare ``.npy``. Each gets
an ``.npy`` corpus of token ids (no tokenizer is needed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

DATA = Path(__file__).resolve().parents[1] / "data" / "gguf_parity"
N_SEQUENCES, SEQ_LEN = 4, 32


def _tokens(folder: Path, vocab: int) -> Path:
    path = folder / "tokens.npy"
    np.save(path, np.random.default_rng(0).integers(0, vocab, size=(N_SEQUENCES, SEQ_LEN)))
    return path


def _save(model: transformers.PreTrainedModel, folder: Path) -> Path:
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def kind_models(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """``{kind: (model path, corpus .npy)}``."""
    root = tmp_path_factory.mktemp("card_models")
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=61, n_positions=48, n_embd=32, n_layer=2, n_head=4, n_inner=64)
    ).eval()
    with torch.no_grad():
        gpt2.transformer.wpe.weight.mul_(20)
    llama = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=61,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            rope_theta=500.0,
        )
    ).eval()
    with torch.no_grad():
        for block in llama.model.layers:
            block.self_attn.q_proj.weight.mul_(8)
            block.self_attn.k_proj.weight.mul_(8)
    bloom = transformers.BloomForCausalLM(
        transformers.BloomConfig(vocab_size=61, hidden_size=32, n_layer=2, n_head=4)
    )
    out = {}
    for kind, model in (("learned", gpt2), ("rotary", llama), ("no_table", bloom.eval())):
        folder = _save(model, root / kind)
        out[kind] = (folder, _tokens(folder, 61))
    per_type = root / "per_type"
    per_type.mkdir()
    out["per_type"] = (DATA / "gemma3", _tokens(per_type, 256))
    t = np.arange(300)[:, None]
    helix = np.hstack([np.cos(2 * np.pi * t / 120), np.sin(2 * np.pi * t / 120), t / 300.0])
    basis = np.linalg.qr(np.random.default_rng(1).standard_normal((24, 3)))[0].T  # orthonormal: a round helix
    table = helix @ basis + 0.01 * np.random.default_rng(2).standard_normal((300, 24))
    np.save(root / "helix.npy", table.astype(np.float32))
    out["table_file"] = (root / "helix.npy", None)
    return out


@pytest.fixture(scope="session")
def kind_cards(kind_models):
    """``{kind: Card}`` of each model, made once (device cpu, no progress)."""
    from pos_geometry.cards import card

    return {
        kind: card(path, tokens, device="cpu", progress=False) for kind, (path, tokens) in kind_models.items()
    }


HOSTILE_NAME = (
    "m<img src=x onerror=alert(1)>\n\n## Verdicts\n\n- [measured] a fake verdict [x](javascript:alert(1)) "
    "<a href=x>link <b>bold <span style=font-size:90px>big \x1b[31m`"
)
"""A name holding HTML, Markdown blocks and links, plotly's markup and a terminal escape (no ``/``: a file name)."""


@pytest.fixture(scope="session")
def hostile_cards(kind_models, tmp_path_factory):
    """Two cards made by the CLI from untrusted strings, ``{kind: (out folder, CLI output)}``: ``table`` a
    safetensors table file named :data:`HOSTILE_NAME` whose one tensor key holds backticks and markup;
    ``rotary`` the tiny Llama copied into a folder of that name, with a string config field of markup and a
    corpus file of that name (a fast card)."""
    import json
    import shutil

    from safetensors.numpy import save_file
    from typer.testing import CliRunner

    from pos_geometry.cli import app

    root = tmp_path_factory.mktemp("hostile")
    t = np.arange(200)[:, None]
    table = np.hstack([np.cos(2 * np.pi * t / 80), np.sin(2 * np.pi * t / 80), t / 200.0, 0 * t + 0.1])
    table = table + 0.01 * np.random.default_rng(3).standard_normal(table.shape)
    path = root / f"{HOSTILE_NAME}.safetensors"
    save_file({"`</script><img src=x>`.wpe.weight": table.astype(np.float32)}, str(path))
    folder = root / HOSTILE_NAME
    shutil.copytree(kind_models["rotary"][0], folder)
    config = json.loads((folder / "config.json").read_text())
    config["_name_or_path"] = "</script><script>alert(1)</script>[x](javascript:alert(1))"
    (folder / "config.json").write_text(json.dumps(config))
    corpus = root / f"{HOSTILE_NAME}.npy"
    shutil.copy(kind_models["rotary"][1], corpus)
    out = {}
    for kind, args in (("table", [str(path)]), ("rotary", [str(folder), "--corpus", str(corpus), "--fast"])):
        result = CliRunner().invoke(
            app, ["card", *args, "--out", str(root / f"out_{kind}"), "--device", "cpu"]
        )
        assert result.exit_code == 0, result.output
        out[kind] = (root / f"out_{kind}", result.output)
    return out
