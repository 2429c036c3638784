"""open_model: transformers' own output (load report, config warnings, progress bars) stays out of ours."""

from __future__ import annotations

from pathlib import Path

import pytest
import safetensors.torch as st
import torch
import transformers

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.hidden.opening import open_model


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


def test_an_unsafe_pickle_is_refused_as_an_unsafe_checkpoint(tmp_path):
    """A folder whose pytorch_model.bin pickle calls a function outside tensor storage: torch's weights_only
    unpickler refuses it (nothing runs), and that is a typed refusal saying how to convert, not an internal
    error; the CLI prints it and exits 1."""
    import json
    import pickle

    import _pos_geometry_tests_torch_pickles as torch_pickles
    from typer.testing import CliRunner

    from pos_geometry.cli import app
    from pos_geometry.errors import CheckpointFormatError, UnsafeCheckpointError
    from pos_geometry.hidden.opening import open_model

    class Evil:
        def __reduce__(self):
            return (print, ("pos_geometry ran a pickle",))

    config = {"model_type": "llama", "hidden_size": 16, "intermediate_size": 16, "num_attention_heads": 2,
              "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 32, "max_position_embeddings": 64}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    import io
    import zipfile

    import torch

    buf = io.BytesIO()
    torch.save(
        {"model.embed_tokens.weight": torch.zeros(2)}, buf
    )  # a real torch zip, then its pickle replaced
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    pkl = next(n for n in members if n.endswith("data.pkl"))
    members[pkl] = pickle.dumps({"model.embed_tokens.weight": Evil()}, protocol=2)
    (tmp_path / "pytorch_model.bin").write_bytes(torch_pickles.zip_members(members))
    with pytest.raises(UnsafeCheckpointError, match="not a safe checkpoint") as info:
        open_model(tmp_path, device="cpu")
    assert isinstance(info.value, CheckpointFormatError)
    result = CliRunner().invoke(app, ["hidden", str(tmp_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and "not a safe checkpoint" in result.output
    assert "internal error" not in result.output and "pos_geometry ran a pickle" not in result.output
