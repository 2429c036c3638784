"""Small things a newcomer reads: ``version`` as a command, what ``wrote`` counts, the first sentence of a reason
never leaving a parenthesis open, null names in words, GGUF among the formats an unknown file is told about."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pos_geometry import __version__
from pos_geometry.cli import app
from pos_geometry.cli._common import wrote


def test_version_is_a_command_and_a_flag():
    for args in (["version"], ["--version"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0 and result.stdout.strip() == f"pos-geometry {__version__}"


def test_wrote_counts_figures_and_data_files_apart(tmp_path):
    (tmp_path / "plotly.min.js").write_text("x")
    files = [tmp_path / n for n in ("a.html", "a.png", "b.html", "m.json", "m.csv")]
    assert wrote(files, tmp_path) == (
        f"wrote 3 figures (html, png), 2 data files (csv, json) and the shared plotly.min.js to {tmp_path}"
    )
    assert wrote([tmp_path / "only.json"], Path("o")) == "wrote 1 data file (json) to o"


def test_the_first_sentence_of_a_reason_closes_its_parentheses():
    from pos_geometry.cards.result import short_reason

    reason = "no learned table (it uses rotary embeddings. See the rotary section) here. More words."
    assert short_reason(reason) == "no learned table (it uses rotary embeddings. See the rotary section) here"
    assert short_reason("one. two") == "one"


def test_nulls_are_named_in_words_in_a_line():
    import numpy as np

    import pos_geometry as pg

    t = np.arange(200)[:, None]
    table = np.hstack([np.cos(2 * np.pi * t / 70), np.sin(2 * np.pi * t / 70), t / 200]) @ np.eye(3, 8)
    table = table + 0.01 * np.random.default_rng(0).standard_normal(table.shape)
    analysis = pg.analyze(table, analyses=("helix",), progress=False)
    line = analysis.line()  # what `plot` prints per model
    assert "smooth gp" not in line and "step walk" not in line and "smooth random curves" in line
    rows = dict(analysis.helix.summary_rows())
    assert "null: smooth random curves" in rows and "null: smooth gp" not in rows


def test_an_unknown_file_is_told_every_format_gguf_included(tmp_path):
    import pos_geometry as pg
    from pos_geometry.errors import CheckpointFormatError

    path = tmp_path / "table.bin"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointFormatError, match=r"GGUF \(\.gguf\)"):
        pg.load(path)


@pytest.mark.parametrize("args", [["--help"], ["card", "--help"], ["analyze", "--help"]])
def test_flags_are_shown_as_flags_in_help(args):
    result = CliRunner().invoke(app, args, terminal_width=120)
    assert result.exit_code == 0 and "<bool>" not in result.output, result.output


def test_reproduce_refuses_a_folder_of_other_files_before_any_work_and_says_when_it_replaces(
    tmp_path, monkeypatch
):
    import pos_geometry.reproduction.runner as runner_module

    class Result:
        def summary_text(self) -> str:
            return "done"

    calls = []
    monkeypatch.setattr(runner_module, "reproduce_blog_post", lambda out, **kw: calls.append(out) or Result())
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("x")
    refused = CliRunner().invoke(app, ["reproduce", "--out", str(mine), "--format", "html"])
    assert refused.exit_code == 1 and "not a reproduction's ('thesis.tex')" in refused.output and calls == []
    forced = CliRunner().invoke(app, ["reproduce", "--out", str(mine), "--format", "html", "--force"])
    assert forced.exit_code == 0 and calls == [mine]
    earlier = tmp_path / "rep"
    (earlier / "figures").mkdir(parents=True)
    (earlier / "report.md").write_text("old")
    again = CliRunner().invoke(app, ["reproduce", "--out", str(earlier), "--format", "html"])
    assert (
        again.exit_code == 0
        and "the earlier reproduction in" in again.output
        and "was replaced" in again.output
    )


def test_no_command_help_names_a_source_file_or_shows_raw_markup():
    """Help is for a reader: no path into the package, no reStructuredText backticks, no '<bool>' flags."""
    import re

    from typer.testing import CliRunner

    from pos_geometry.cli import app

    runner = CliRunner()
    commands = [c.name or c.callback.__name__ for c in app.registered_commands]
    assert len(commands) >= 8
    for command in [None, *commands]:
        out = runner.invoke(app, [command, "--help"] if command else ["--help"], terminal_width=200).output
        assert not re.findall(r"\b[\w/]+\.py\b", out), command
        assert "``" not in out and "<bool>" not in out, command
        usage = next((line for line in out.splitlines() if "Usage:" in line), "")
        assert not re.findall(r"\{[a-z_]+\}", usage), usage  # one placeholder style: {MODEL_OR_PATH}
