"""``pos-geometry hidden`` in-process: what it writes, and that it equals the Python API."""

from __future__ import annotations

import csv
import json

import numpy as np
import transformers
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry.cli import app
from pos_geometry.hidden import METRIC_NAMES


def test_hidden_writes_metrics_attention_and_figures(tiny_gpt2, tmp_path, monkeypatch):
    tiny_gpt2.save_pretrained(tmp_path / "model")
    calls = []
    forward = transformers.GPT2Model.forward
    monkeypatch.setattr(
        transformers.GPT2Model, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k)
    )
    tokens = np.random.default_rng(0).integers(0, 50, size=(5, 24))
    np.save(tmp_path / "ids.npy", tokens)
    out = tmp_path / "out"
    args = ["hidden", str(tmp_path / "model"), "--corpus", str(tmp_path / "ids.npy"), "--layers", "0,2"]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--batch-size", "2", "--save-tables"])
    assert result.exit_code == 0, result.output
    assert len(calls) == 3  # one pass over 5 contexts in batches of 2 reads hidden states and attention
    monkeypatch.undo()
    files = {p.name for p in out.iterdir()}
    assert {"metrics.json", "metrics.csv", "attention.json", "metrics.html", "trajectory.html"} <= files
    assert {"attention_logit.html", "attention_probability.html", "positional"} <= files
    expected = pg.hidden_positions(tiny_gpt2, tokens, layers=[0, 2])
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert [int(r["layer"]) for r in rows] == [0, 2]
    for row, i in zip(rows, range(2), strict=True):
        for name in METRIC_NAMES:
            np.testing.assert_allclose(float(row[name]), expected.metric(name)[i], rtol=1e-6, err_msg=name)
    data = json.loads((out / "metrics.json").read_text())
    assert data["provenance"]["config"]["corpus"].startswith("token ids from ids.npy: 5 x 24")
    att = json.loads((out / "attention.json").read_text())
    assert att["layers"] == [0]  # layer 2 is the last block's output: no block 2 to read attention from
    table = pg.PositionalEmbedding.load(out / "positional" / "layer_2.safetensors")
    np.testing.assert_allclose(table.numpy(), expected.positional[2].numpy(), atol=1e-6)
    assert "layer   0: positional share" in result.output


def test_hidden_bad_layers_is_one_line_and_status_1(tiny_gpt2, tmp_path):
    tiny_gpt2.save_pretrained(tmp_path / "model")
    result = CliRunner().invoke(
        app, ["hidden", str(tmp_path / "model"), "--layers", "9", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1
    assert "layer 9 is out of range" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()  # a failed run leaves no (empty) output folder


def test_without_a_terminal_a_long_command_prints_a_line_per_stretch(monkeypatch):
    from pos_geometry.cli import _common

    lines = []

    class FakeBar:
        def update(self, *args, **kwargs):
            pass

    class Log:
        is_terminal = False

        def print(self, text, **kwargs):
            lines.append(text)

    monkeypatch.setattr(_common, "err", lambda: Log())
    monkeypatch.setattr(_common, "LINE_EVERY_S", 0.0)
    report = _common.reporter(FakeBar(), 0, "hidden states", "contexts")
    for done in (8, 16, 24):
        report(done, 24)
    assert [line.split(" (")[0] for line in lines] == [f"hidden states: {d}/24 contexts" for d in (8, 16, 24)]


def _word_tokenizer(folder, vocab_size: int) -> None:
    """A word-level tokenizer over ``vocab_size`` ids (unknown words share one), saved into ``folder``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", "the", "and", "to", "a", "she", "of", "it", "said", "Alice", "was", "in", "you", "I"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words[:vocab_size])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(folder)


def test_hidden_reads_the_default_text_as_the_card_does(tiny_gpt2, tmp_path):
    # one default corpus across the commands that run a model: the public-domain text, with the model's tokenizer
    from pos_geometry.cards.corpus import default_corpus

    tiny_gpt2.save_pretrained(tmp_path / "model")
    _word_tokenizer(tmp_path / "model", 14)
    args = ["hidden", str(tmp_path / "model"), "--layers", "0", "--seq-len", "32", "--n-sequences", "3"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o"), "--no-attention"])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert default_corpus().name in data["provenance"]["config"]["corpus"]
    # without a tokenizer the text cannot be read: random tokens, and every output says so
    tiny_gpt2.save_pretrained(tmp_path / "bare")
    args[1] = str(tmp_path / "bare")
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "r"), "--no-attention"])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert data["provenance"]["config"]["corpus"].startswith("random tokens")
