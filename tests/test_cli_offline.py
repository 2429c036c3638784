"""What a newcomer meets offline and with typos: a path that does not exist is called a missing path, a
misspelt analysis is refused before any loading with the closest name, and a sweep in which no checkpoint could
be read is a failure that says why."""

from __future__ import annotations

from typer.testing import CliRunner

from pos_geometry import cli

runner = CliRunner()


def test_info_on_a_missing_file_says_the_file_is_missing(tmp_path):
    res = runner.invoke(cli.app, ["info", str(tmp_path / "does" / "not" / "exist.npy")])
    assert (
        res.exit_code == 1
        and "No file or folder at" in res.stderr
        and "model table" not in res.stderr.split(":")[0]
    )


def test_a_misspelt_analysis_is_refused_before_loading(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("loaded before the arguments were checked")

    monkeypatch.setattr("pos_geometry.cli.tables.load_all", never)
    res = runner.invoke(cli.app, ["analyze", "gpt2", "--analyses", "helx"])
    assert res.exit_code == 1 and "Did you mean helix?" in res.stderr


def test_a_sweep_in_which_nothing_could_be_read_fails_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = runner.invoke(
        cli.app, ["sweep", "pythia-70m", "--revisions", "step0,step1000", "--out", str(tmp_path)]
    )
    assert res.exit_code == 1
    assert "0/2 checkpoints ok" in res.output
    assert (
        "error: no checkpoint of pythia-70m could be read: unreachable" in res.stderr
        and "metrics.csv" in res.stderr
    )
