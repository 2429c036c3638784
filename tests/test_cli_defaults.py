"""One default per choice across the entry points, and the flags a newcomer types where they type them: the
global flags after the command too, the same file names for a table however it is named, the counts a
command prints, the model's width beside the table's columns, and the cost of a large table said first."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry import _progress
from pos_geometry.analysis import costs
from pos_geometry.cli import app

runner = CliRunner()


@pytest.fixture
def table_path(tmp_path: Path) -> Path:
    t = np.arange(256.0)[:, None]
    table = np.concatenate([np.cos(t / 20), np.sin(t / 20), t / 100], axis=1) @ np.random.default_rng(
        0
    ).normal(size=(3, 16))
    path = tmp_path / "helix.npy"
    np.save(path, table + 0.01 * np.random.default_rng(1).normal(size=table.shape))
    return path


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_is_taken_before_or_after_the_command(where, monkeypatch):
    monkeypatch.setitem(_progress._settings, "quiet", False)
    args = ["--quiet", "models", "gpt2"] if where == "before" else ["models", "gpt2", "--quiet"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert _progress._settings["quiet"] is True


def test_a_table_named_or_given_by_path_gets_one_file_name(tmp_path, real_data_dir):
    by_name = runner.invoke(app, ["plot", "gpt2", "--out", str(tmp_path / "a")])
    by_path = runner.invoke(
        app, ["plot", f"gpt2={real_data_dir / 'gpt2_small_wpe.npy'}", "--out", str(tmp_path / "b")]
    )
    assert by_name.exit_code == 0 and by_path.exit_code == 0, by_name.output + by_path.output
    assert (tmp_path / "a" / "gpt2.html").is_file() and (tmp_path / "b" / "gpt2.html").is_file()
    assert "wrote 1 figure (html) and the shared plotly.min.js" in by_name.stdout


def test_analyze_reports_the_models_width_beside_the_tables_columns():
    res = runner.invoke(app, ["analyze", "pythia-70m", "--json", "--analyses", "helix", "--window", "0:256"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    assert (row["n_columns"], row["d_model"]) == (16, 512)  # 8 rotation planes of a 512-wide model


def test_a_large_table_is_announced_with_its_cost_before_the_work(table_path, monkeypatch):
    monkeypatch.setattr(costs, "COSTLY_POSITIONS", 100)
    res = runner.invoke(app, ["analyze", str(table_path), "--analyses", "recurrence"])
    assert res.exit_code == 0, res.output
    (note,) = [line for line in res.stderr.splitlines() if line.startswith("note:")]
    assert "256 positions" in note and "--window" in note
    small = runner.invoke(app, ["analyze", str(table_path), "--analyses", "recurrence", "--window", "0:100"])
    assert "note:" not in small.stderr


def test_the_api_warns_of_the_cost_before_any_work():
    table = pg.sinusoidal(costs.COSTLY_POSITIONS + 1, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", costs.CostWarning)  # raised at the check: nothing was computed yet
        with pytest.raises(costs.CostWarning, match=f"{costs.COSTLY_POSITIONS + 1} positions"):
            pg.analyze(table)
    with warnings.catch_warnings():
        warnings.simplefilter("error", costs.CostWarning)
        pg.analyze(table, window=(0, 512), analyses=("recurrence",), n_surrogates=0)  # a window: no warning


def test_every_command_defaults_to_the_same_device():
    import inspect

    from pos_geometry.cli import reproduce

    assert inspect.signature(reproduce.reproduce).parameters["device"].default.default == "auto"
    assert inspect.signature(pg.rotary_atlas).parameters["device"].default == "auto"
