"""No input shows a traceback without ``--debug`` (issue 10, item 9): each hostile file is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from pos_geometry import cli
from pos_geometry.errors import CheckpointFormatError

runner = CliRunner()


def _zero_stride(path: Path) -> Path:
    # the reproduction: a (2**14, 2**14) view of one element, which used to load as a 1 GiB table
    torch.save({"transformer.wpe.weight": torch.zeros(1).expand(2**14, 2**14)}, path / "zero.bin")
    return path / "zero.bin"


def _complex(path: Path) -> Path:
    save_file({"transformer.wpe.weight": torch.ones(8, 4, dtype=torch.complex64)}, path / "c.safetensors")
    return path / "c.safetensors"


def _garbage(path: Path) -> Path:
    (path / "g.safetensors").write_bytes(b"\xff" * 8 + b"{" + b"\x00" * 64)
    return path / "g.safetensors"


@pytest.mark.parametrize(
    "make", [_zero_stride, _complex, _garbage], ids=["zero-stride", "complex", "garbage"]
)
def test_hostile_files_are_one_line_and_debug_shows_the_error(tmp_path: Path, make) -> None:
    path = make(tmp_path)
    res = runner.invoke(cli.app, ["analyze", str(path), "--device", "cpu"])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert "Traceback" not in res.output
    debug = runner.invoke(cli.app, ["--debug", "analyze", str(path), "--device", "cpu"])
    assert isinstance(debug.exception, CheckpointFormatError)


def test_an_unexpected_exception_is_one_line_that_asks_for_a_report(tmp_path: Path, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate 68719476736 bytes")

    monkeypatch.setattr("pos_geometry.loading.load", broken)
    res = runner.invoke(cli.app, ["analyze", "gpt2", "--device", "cpu"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.stderr.startswith("error: internal error (RuntimeError: DefaultCPUAllocator")
    assert "--debug" in res.stderr
    debug = runner.invoke(cli.app, ["--debug", "analyze", "gpt2", "--device", "cpu"])
    assert isinstance(debug.exception, RuntimeError)
