"""Every CLI option is checked before any work, every string a command prints is one escaped terminal line,
and no error from a dependency escapes untyped: the doors of the card, ``hidden``, ``sweep`` and ``info``."""

from __future__ import annotations

import _pos_geometry_tests_gguf_files as gguf_files
import pytest
from typer.testing import CliRunner

from pos_geometry.cli import app


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_info_refuses_a_gguf_rope_scaling_type_of_escapes_and_prints_none(tmp_path):
    path = gguf_files.tiny_llama_gguf(tmp_path / "m\x1b[2J.gguf", scaling="\x1b]0;owned\x07\x1b[31mlinear")
    result = _invoke("info", str(path))
    assert "\x1b" not in result.output and "\x07" not in result.output, result.output
    assert (
        result.exit_code == 1 and "'llama.rope.scaling.type'" in result.output
    )  # refused, before transformers
    assert "\\x1b" in result.output and "linear" in result.output  # warns with it on the terminal
    plain = _invoke("info", str(gguf_files.tiny_llama_gguf(tmp_path / "plain.gguf", scaling="linear")))
    assert plain.exit_code == 0 and "rope_parameters" in plain.output and "linear" in plain.output


@pytest.mark.parametrize("value", ["-1", "0"])
def test_hidden_refuses_a_max_offset_below_one_before_any_work(tmp_path, value):
    result = _invoke("hidden", "pythia-70m", "--out", str(tmp_path / "o"), "--max-offset", value)
    assert result.exit_code == 1 and "--max-offset must be a whole number ≥ 1" in result.output, result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "address", ["tcp://[::1", "tcp://", "http://host:8786", "tcp://host:99999", "tcp://h:1/x"]
)
def test_a_malformed_scheduler_address_is_a_typed_error_before_any_request(tmp_path, address):
    from pos_geometry.errors import InvalidArgumentError
    from pos_geometry.sweeps.executors import describe_executor

    with pytest.raises(InvalidArgumentError, match="not a Dask scheduler address"):
        describe_executor(address, None)
    result = _invoke("sweep", "pythia-70m", "--out", str(tmp_path / "o"), "--executor", address)
    assert result.exit_code == 1 and "not a Dask scheduler address" in result.output, result.output
    assert "internal error" not in result.output
    assert describe_executor("tcp://[::1]:8786", None) == "dask tcp://[::1]:8786"


@pytest.mark.parametrize(("option", "value"), [("--seq-len", "0"), ("--n-sequences", "-3")])
def test_the_card_refuses_bad_sizes_before_any_work(tmp_path, option, value):
    result = _invoke("card", "gpt2", "--out", str(tmp_path / "o"), option, value)
    assert (
        result.exit_code == 1
        and f"{option[2:].replace('-', '_')} must be a positive whole number" in result.output
    )
    assert not (tmp_path / "o").exists()


def test_the_card_refuses_an_unwritable_out_before_any_work():
    result = _invoke("card", "gpt2", "--out", "/proc/self/pos_geometry_card")
    assert result.exit_code == 1 and "cannot be written" in result.output, result.output


def test_the_card_refuses_a_folder_of_other_files_before_any_work(tmp_path):
    (tmp_path / "thesis.tex").write_text("mine")
    result = _invoke("card", "gpt2", "--out", str(tmp_path))
    assert result.exit_code == 1 and "not a positional card's" in result.output
    assert [p.name for p in tmp_path.iterdir()] == ["thesis.tex"]
