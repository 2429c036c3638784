"""Corpora are inputs too: every hostile one ends in a typed error or a correct result, in bounded time and memory.

``make_corpus`` directly, with a character-level stand-in tokenizer (one id per byte), so the test needs no model.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError
from pos_geometry.hidden.corpus import make_corpus


def _bytes_tokenizer(text: str, add_special_tokens: bool = False) -> dict:
    return {"input_ids": list(text.encode("utf-8"))}


def _corpus(tokens, **kw):
    return make_corpus(tokens, vocab_size=256, context_length=1024, tokenizer=_bytes_tokenizer, **kw)


def test_text_is_cut_into_contexts_of_its_tokens(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abcdefgh" * 10)
    corpus = _corpus(path, seq_len=8, n_sequences=3)
    assert corpus.tokens.shape == (3, 8) and corpus.tokens[0].tolist() == list(b"abcdefgh")


@pytest.mark.parametrize(
    "data, words",
    [
        (bytes(range(256)) * 4, "not UTF-8 text (byte 128"),
        ("é".encode() * 50 + b"\xff\xfe" + b"x" * 100, "not UTF-8 text (byte 100"),
    ],
)
def test_binary_or_partly_non_utf8_text_is_a_typed_error_with_the_offset(tmp_path, data, words):
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    with pytest.raises(InvalidArgumentError, match=words.replace("(", r"\(")):
        _corpus(path, seq_len=8)


def test_a_large_text_is_read_only_as_far_as_the_contexts_need(tmp_path, monkeypatch):
    monkeypatch.setenv("POS_GEOMETRY_MAX_CORPUS_BYTES", "1000")
    path = tmp_path / "big.txt"
    path.write_text("0123456789" * 20_000)  # 200 KB, over the limit
    corpus = _corpus(path, seq_len=16, n_sequences=2)  # 32 tokens needed: a few hundred bytes read
    assert corpus.tokens.shape == (2, 16)
    with pytest.raises(InvalidArgumentError, match="POS_GEOMETRY_MAX_CORPUS_BYTES"):
        _corpus(path, seq_len=16)  # all of it asked for


def test_a_character_cut_at_the_end_of_what_was_read_is_not_an_error(tmp_path):
    path = tmp_path / "u.txt"
    path.write_text("é" * 5000)  # 2 bytes per character
    corpus = _corpus(path, seq_len=4, n_sequences=3)  # 12 tokens: the read may end inside a character
    assert corpus.tokens.shape == (3, 4)


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"seq_len": 0}, "seq_len must be an int >= 2"),
        ({"seq_len": -5}, "seq_len must be an int >= 2"),
        ({"n_sequences": 0}, "n_sequences must be an int >= 2"),
        ({"n_sequences": -1}, "n_sequences must be an int >= 2"),
        ({"seq_len": 2.5}, "seq_len must be an int"),
    ],
)
def test_counts_are_checked_before_they_are_used(kw, words):
    tokens = np.zeros((4, 8), dtype=np.int64)
    with pytest.raises(InvalidArgumentError, match=words):
        _corpus(tokens, **kw)


def test_the_random_default_is_checked_before_it_allocates():
    with pytest.raises(InvalidArgumentError, match="POS_GEOMETRY_MAX_ELEMENTS"):
        _corpus(None, seq_len=1_000_000, n_sequences=1_000_000)


def _finishes(fn, seconds: float = 10.0):
    """``fn``'s exception, raised within ``seconds`` (a read of a pipe would block forever)."""
    box: list = []

    def run() -> None:
        try:
            fn()
        except Exception as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked on a special file"
    return box[0] if box else None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_special_files_are_refused_not_read(tmp_path):
    import pos_geometry as pg

    fifo = tmp_path / "corpus.txt"
    os.mkfifo(fifo)
    assert isinstance(_finishes(lambda: _corpus(fifo, seq_len=8)), CheckpointFormatError)
    assert isinstance(_finishes(lambda: pg.describe_checkpoint(fifo)), CheckpointFormatError)
    folder = tmp_path / "model"
    folder.mkdir()
    os.mkfifo(folder / "model.safetensors")
    exc = _finishes(lambda: pg.load(folder))
    assert isinstance(exc, CheckpointFormatError) and "named pipe" in str(exc)
    os.mkfifo(folder / "config.json")
    assert isinstance(_finishes(lambda: pg.describe_checkpoint(folder)), CheckpointFormatError)
