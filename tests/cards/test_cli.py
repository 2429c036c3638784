"""``pos-geometry card``: the files, the verdicts printed, a line per section in a log, one-line errors."""

from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from pos_geometry.cli import app


def test_card_writes_the_folder_and_prints_every_verdict(kind_models, tmp_path):
    path, tokens = kind_models["rotary"]
    out = tmp_path / "card"
    result = CliRunner().invoke(app, ["card", str(path), "--out", str(out), "--corpus", str(tokens), "--fast",
                                      "--device", "cpu"])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads((out / "card.json").read_text())
    for section in data["sections"]:
        for verdict in section["verdicts"]:
            assert verdict["text"] in result.output
    assert "[skipped] Does the model use it: causal edits: skipped: fast card" in result.output
    # no terminal: a line when each section starts and when it ends, numbered 1..6 over a fixed 6
    starts = [line for line in result.output.splitlines() if line.endswith(": started")]
    assert [line.split("]")[0] for line in starts] == [f"card [{k}/6" for k in range(1, 7)]
    assert "card [6/6] Does the model use it: causal edits: done in" in result.output
    assert f"open {out / 'index.html'}" in result.output


def test_a_misspelt_model_is_one_line_with_the_closest_names_and_no_folder(tmp_path):
    result = CliRunner().invoke(app, ["card", "gtp2", "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "gpt2" in result.output and not (tmp_path / "o").exists()


def test_the_cdn_is_refused_before_any_work(tmp_path):
    result = CliRunner().invoke(app, ["card", "gpt2", "--out", str(tmp_path / "o"), "--plotlyjs", "cdn"])
    assert result.exit_code == 1 and "offline" in result.output and not (tmp_path / "o").exists()


def test_a_rerun_with_the_same_inputs_comes_from_the_results_cache(kind_models, tmp_path, monkeypatch):
    """The same model, corpus and options: the card is copied from the cache (its files byte for byte, its
    verdicts printed, and the line says so); a changed input or --force computes it again."""
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "cache"))
    path, _ = kind_models["table_file"]
    table = tmp_path / "helix.npy"
    table.write_bytes(path.read_bytes())
    args = ["card", str(table), "--out", str(tmp_path / "a"), "--device", "cpu"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "results cache" not in first.output
    again = CliRunner().invoke(app, [*args[:3], str(tmp_path / "b"), *args[4:]])
    assert again.exit_code == 0 and "from the results cache" in again.output, again.output
    for name in ("card.json", "card.md", "index.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    verdicts = [line for line in first.output.splitlines() if line.startswith("  [")]
    assert verdicts and verdicts == [line for line in again.output.splitlines() if line.startswith("  [")]
    forced = CliRunner().invoke(app, [*args, "--force"])
    assert forced.exit_code == 0 and "results cache" not in forced.output
    os.utime(table, ns=(0, 0))  # the file changed (its stat): the key changes
    changed = CliRunner().invoke(app, args)
    assert changed.exit_code == 0 and "results cache" not in changed.output
