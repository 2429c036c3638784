"""The ``pos-geometry`` CLI, in process with typer's CliRunner, on synthetic and real tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA
from typer.testing import CliRunner

from pos_geometry.cli import app
from pos_geometry.errors import UnknownModelError

runner = CliRunner()


def _helix_table(n: int = 256, d: int = 32, seed: int = 0) -> np.ndarray:
    """A noisy helix (period 64) embedded in d dimensions by a random orthonormal map."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    z = np.stack([np.cos(2 * np.pi * t / 64), np.sin(2 * np.pi * t / 64), t / n], axis=1)
    q, _ = np.linalg.qr(rng.normal(size=(d, 3)))
    return (z @ q.T + 0.01 * rng.normal(size=(n, d))).astype(np.float32)


@pytest.fixture
def table_path(tmp_path: Path) -> Path:
    path = tmp_path / "helix.npy"
    np.save(path, _helix_table())
    return path


def test_plot_writes_one_figure_per_model_and_a_grid(table_path: Path, tmp_path: Path):
    out = tmp_path / "figs"
    res = runner.invoke(app, ["plot", str(table_path), str(table_path), "--out", str(out), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    htmls = sorted(p.name for p in out.glob("*.html"))
    assert "grid.html" in htmls and len(htmls) == 2  # the same path twice -> one file name, plus the grid
    lines = [ln for ln in res.stdout.splitlines() if "top-3 variance" in ln]
    assert len(lines) == 2
    expected = PCA(3).fit(np.load(table_path).astype(np.float64)).explained_variance_ratio_.sum()
    assert f"{100 * expected:.2f}%" in lines[0]
    assert "256×32 learned" in lines[0] and "turns" in lines[0] and "R²" in lines[0]


def test_plot_window_and_bad_format(table_path: Path, tmp_path: Path):
    res = runner.invoke(app, ["plot", str(table_path), "--out", str(tmp_path), "--window", "10:200"])
    assert res.exit_code == 0, res.output
    assert "rows 10–199" in res.stdout
    bad = runner.invoke(app, ["plot", str(table_path), "--out", str(tmp_path), "--format", "gif"])
    assert bad.exit_code == 1
    assert "--format" in bad.stderr and "Traceback" not in bad.output


def test_analyze_json_matches_the_api_and_sklearn(table_path: Path):
    from pos_geometry.analysis.helix import fit_helix
    from pos_geometry.loading import load

    res = runner.invoke(app, ["analyze", str(table_path), "--json", "--window", "1:"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)  # nothing but JSON on stdout (progress goes to stderr)
    assert len(rows) == 1
    row = rows[0]
    data = np.load(table_path).astype(np.float64)[1:]
    oracle = np.cumsum(PCA(10).fit(data).explained_variance_ratio_)
    assert row["top3"] == pytest.approx(oracle[2], abs=1e-4)
    assert row["top1"] == pytest.approx(oracle[0], abs=1e-4)
    assert row["window"] == "1:256" and row["n_positions"] == 256 and row["d_model"] == 32
    fit = fit_helix(load(table_path), window=(1, None))
    assert row["helix_period"] == pytest.approx(float(fit.periods[0]), rel=1e-6)
    assert row["helix_period"] == pytest.approx(64, rel=0.02)  # the planted period


def test_analyze_csv_and_table(table_path: Path):
    res = runner.invoke(app, ["analyze", str(table_path), "--csv"])
    assert res.exit_code == 0, res.output
    header, first = res.stdout.strip().splitlines()[:2]
    assert header.startswith("model,kind,n_positions,d_model,window,top1,top3")
    assert first.split(",")[2:4] == ["256", "32"]
    table = runner.invoke(app, ["analyze", str(table_path)])
    assert table.exit_code == 0 and "top3" in table.stdout


def test_analyze_rejects_json_and_csv_together(table_path: Path):
    res = runner.invoke(app, ["analyze", str(table_path), "--json", "--csv"])
    assert res.exit_code == 2


@pytest.mark.parametrize("window", ["a:b", "5", "1:2:3", "300:400"])
def test_bad_windows_are_one_clear_error(table_path: Path, window: str):
    res = runner.invoke(app, ["analyze", str(table_path), "--window", window])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: ") and "window" in res.stderr
    assert "Traceback" not in res.output


def test_missing_file_is_a_clear_error(tmp_path: Path):
    res = runner.invoke(app, ["analyze", str(tmp_path / "nope.npy"), "--offline"])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: ") and "Traceback" not in res.output


def test_info_gpt2():
    res = runner.invoke(app, ["info", "gpt2-small"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    for text in (
        "openai-community/gpt2",
        "wpe.weight",
        "1024 × 768",
        "learned",
        "cached locally",
        "revisions",
    ):
        assert text in out, text


def test_info_rotary_model_says_no_learned_table():
    res = runner.invoke(app, ["info", "pythia-70m"])
    assert res.exit_code == 0, res.output
    assert "rotary" in res.stdout and "no learned positional table" in res.stdout
    assert "154" in res.stdout  # Pythia's published checkpoints, from the schedule
    assert "step0" in res.stdout and "step143000" in res.stdout


def test_info_typo_suggests_and_has_no_traceback():
    res = runner.invoke(app, ["info", "gtp2-medum"])
    assert res.exit_code == 1
    assert "gpt2-medium" in res.stderr
    assert "Traceback" not in res.output


def test_debug_shows_the_exception():
    res = runner.invoke(app, ["--debug", "info", "gtp2-medum"])
    assert res.exit_code != 0
    assert isinstance(res.exception, UnknownModelError)


def test_usage_errors_exit_2():
    assert runner.invoke(app, ["plot"]).exit_code == 2
    assert runner.invoke(app, ["frobnicate"]).exit_code == 2


def test_reproduce_rejects_malformed_model_paths(tmp_path: Path):
    res = runner.invoke(app, ["reproduce", "--out", str(tmp_path), "--model", "gpt2-medium"])
    assert res.exit_code == 1
    assert "NAME=PATH" in res.stderr and "Traceback" not in res.output
    res = runner.invoke(app, ["reproduce", "--out", str(tmp_path), "--model", "gtp2=/x.npy"])
    assert res.exit_code == 1 and "gpt2" in res.stderr
