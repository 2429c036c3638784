"""open_model: transformers' own output (load report, config warnings, progress bars) stays out of ours."""

from __future__ import annotations

from pathlib import Path

import pytest
import safetensors.torch as st
import torch
import transformers

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.hidden.model import open_model


def _folder_with_an_unexpected_key(path: Path) -> Path:
    """A tiny GPT-2 whose weights hold one key the model does not have (transformers reports it, in colour)."""
    config = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=50, n_positions=32)
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    weights = st.load_file(path / "model.safetensors")
    weights["transformer.junk.weight"] = torch.zeros(3)
    st.save_file(weights, path / "model.safetensors", metadata={"format": "pt"})
    return path


def test_no_load_report_or_ansi_codes_reach_the_output(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from transformers.utils import logging as tlog

    folder = _folder_with_an_unexpected_key(tmp_path / "g")
    before = (tlog.get_verbosity(), tlog.is_progress_bar_enabled())
    capfd.readouterr()
    loaded = open_model(folder)
    out = capfd.readouterr()
    assert loaded.module is not None
    assert "LOAD REPORT" not in out.err + out.out and "\x1b[" not in out.err + out.out
    assert "Loading weights" not in out.err  # no progress bar of transformers' own
    assert (tlog.get_verbosity(), tlog.is_progress_bar_enabled()) == before  # restored afterwards


def test_a_malformed_config_is_a_typed_error(tmp_path: Path) -> None:
    folder = _folder_with_an_unexpected_key(tmp_path / "g")
    config = (
        (folder / "config.json").read_text().replace('"n_head": 2', '"n_head": 3')
    )  # 16 is not divisible by 3
    (folder / "config.json").write_text(config)
    with pytest.raises(CheckpointFormatError, match="transformers could not build"):
        open_model(folder)
