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


def test_an_error_quoting_hostile_key_names_is_one_escaped_bounded_line(tmp_path: Path) -> None:
    """Key names holding terminal escapes and line breaks, 20 of them 100 KB long: the error that lists them
    is one line, every control character escaped (nothing can clear the screen), and bounded."""
    keys = {f"\x1b[2J\x1b[31mkey{i}\n\r" + "k" * 100_000: torch.zeros(3) for i in range(20)}
    save_file(keys, tmp_path / "hostile.safetensors")
    res = runner.invoke(cli.app, ["analyze", str(tmp_path / "hostile.safetensors"), "--device", "cpu"])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert "\x1b" not in res.stderr and "\r" not in res.stderr and "\\x1b" in res.stderr
    assert len(res.stderr) < 2_500 and "characters)" in res.stderr


def test_edit_syntax_in_a_message_is_printed_as_written(tmp_path: Path) -> None:
    """rich would turn ``:yarn:`` into an emoji; an error message is printed exactly."""
    from pos_geometry.errors import InvalidArgumentError

    def fails() -> None:
        raise InvalidArgumentError("use rope:yarn:2 or [red]x[/red]")

    res = runner.invoke(typer_app_raising(fails), [])
    assert res.stderr.strip() == "error: use rope:yarn:2 or [red]x[/red]"


def typer_app_raising(fn):
    import typer

    from pos_geometry.cli._common import guard

    app = typer.Typer()

    @app.command()
    def main() -> None:
        guard(fn)

    return app
