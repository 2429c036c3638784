"""The ``pos-geometry`` CLI, in process with typer's CliRunner, on synthetic and real tables."""

from __future__ import annotations

import json
import re
import struct
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


def _html_title(path: Path) -> str:
    """The figure title inside a saved HTML page (plotly writes it JSON-escaped)."""
    match = re.search(r'"title":\{"text":"((?:[^"\\]|\\.)*)","x":0\.5', path.read_text(encoding="utf-8"))
    assert match, f"no figure title in {path}"
    return json.loads(f'"{match[1]}"')


def _summary_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if "top-3 variance" in ln]


def test_plot_writes_one_figure_per_model_and_a_grid(table_path: Path, tmp_path: Path):
    other = tmp_path / "other" / "helix.npy"  # a second table with the same file name
    other.parent.mkdir()
    np.save(other, _helix_table(seed=1))
    out = tmp_path / "figs"
    res = runner.invoke(app, ["plot", str(table_path), str(other), "--out", str(out), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    # named after the files, never overwriting each other, plus the grid
    # one shared plotly.js beside the figures, the same default in every command (issue 21)
    assert sorted(p.name for p in out.iterdir()) == [
        "grid.html",
        "helix-2.html",
        "helix.html",
        "plotly.min.js",
    ]
    assert 'src="plotly.min.js"' in (out / "grid.html").read_text(encoding="utf-8")
    assert "wrote 3 figures (html) and the shared plotly.min.js" in res.stdout
    lines = _summary_lines(res.stdout)
    assert len(lines) == 2
    for line, path in zip(lines, (table_path, other), strict=True):
        data = np.load(path).astype(np.float64)
        expected = PCA(3).fit(data).explained_variance_ratio_.sum()
        assert line.startswith(f"{path}: 256×32 learned, rows 0–255, top-3 variance {100 * expected:.2f}%")
        # the planted helix: period 64 over 256 positions -> 4 turns, fitted almost exactly
        assert "helix verdict: helix, p = 0.005" in line  # beats every null at the smallest p
        turns = re.search(r"; ([0-9.]+) turns of period ([0-9.]+), R² ([0-9.]+)", line)
        assert turns, line
        assert float(turns[1]) == pytest.approx(4.0, rel=0.02)
        assert float(turns[2]) == pytest.approx(64.0, rel=0.02)
        assert float(turns[3]) > 0.99
    # each page is the helix of its own table: the title carries its variance of PC1–3
    ratio = PCA(3).fit(np.load(other).astype(np.float64)).explained_variance_ratio_.sum()
    # titled by the model's name (the file's), never its path; the path stays in the summary line
    assert _html_title(out / "helix-2.html") == f"helix · rows 0–255 · PC1–3: {100 * ratio:.1f}%"
    assert "fitted helix" in (out / "helix-2.html").read_text(encoding="utf-8")
    grid = (out / "grid.html").read_text(encoding="utf-8")
    assert grid.count('"type":"scatter3d"') >= 2 and "scene2" in grid
    assert str(tmp_path) not in grid and ".npy" not in grid  # subplot titles are names too


def test_plot_device_auto_gives_the_same_numbers_as_cpu(table_path: Path, tmp_path: Path):
    auto = runner.invoke(app, ["plot", str(table_path), "--out", str(tmp_path / "a"), "--device", "auto"])
    cpu = runner.invoke(app, ["plot", str(table_path), "--out", str(tmp_path / "c"), "--device", "cpu"])
    assert auto.exit_code == 0 and cpu.exit_code == 0, auto.output + cpu.output
    assert _summary_lines(auto.stdout) == _summary_lines(cpu.stdout)


def test_plot_unknown_device_is_one_clear_error(table_path: Path, tmp_path: Path):
    res = runner.invoke(app, ["plot", str(table_path), "--out", str(tmp_path), "--device", "tpu"])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: ") and "tpu" in res.stderr
    assert "Traceback" not in res.output


def test_plot_revision_reaches_the_title_and_file_name(tmp_path: Path):
    # Pythia's rotary table is built from the model table: no download, any published step
    res = runner.invoke(
        app,
        ["plot", "pythia-70m", "--revision", "step1000", "--window", "0:256", "--out", str(tmp_path)],
    )
    assert res.exit_code == 0, res.output
    assert _summary_lines(res.stdout)[0].startswith("pythia-70m@step1000: 2048×16 rotary, rows 0–255")
    title = _html_title(tmp_path / "pythia-70m_step1000.html")
    assert title.startswith("pythia-70m @ step1000 (rotary table) · rows 0–255 · PC1–3: ")
    assert "fitted helix" not in (tmp_path / "pythia-70m_step1000.html").read_text(encoding="utf-8")
    bad = runner.invoke(app, ["plot", "pythia-70m", "--revision", "step7", "--out", str(tmp_path)])
    assert bad.exit_code == 1
    assert "step7" in bad.stderr and "step4 or step8" in bad.stderr and "Traceback" not in bad.output


def test_plot_out_must_be_a_folder(table_path: Path, tmp_path: Path):
    res = runner.invoke(app, ["plot", str(table_path), "--out", str(table_path)])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: --out must be a folder") and "Traceback" not in res.output


def test_plot_png_without_a_browser_fails_early_with_install_hint(
    table_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-chromium"))
    out = tmp_path / "figs"
    res = runner.invoke(app, ["plot", str(table_path), "--out", str(out), "--format", "html,png"])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: no executable browser at BROWSER_PATH=")
    assert "apt-get install -y chromium" in res.stderr and "Traceback" not in res.output
    assert not out.exists()  # checked before any work: nothing half-written


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.browser
@pytest.mark.slow
def test_plot_html_and_png(table_path: Path, tmp_path: Path):
    from pos_geometry.errors import ExportError
    from pos_geometry.loading import load
    from pos_geometry.plotting import find_browser, plot_helix_grid
    from pos_geometry.plotting.export import DEFAULT_HEIGHT, DEFAULT_WIDTH, STATIC_SIZE_META

    try:
        find_browser()
    except ExportError as exc:
        pytest.skip(str(exc))
    out = tmp_path / "figs"
    second = tmp_path / "second.npy"
    np.save(second, _helix_table(seed=1))
    res = runner.invoke(
        app, ["plot", str(table_path), str(second), "--out", str(out), "--format", "html,png"]
    )
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "grid.html",
        "grid.png",
        "helix.html",
        "helix.png",
        "plotly.min.js",
        "second.html",
        "second.png",
    ]
    assert _png_size(out / "helix.png") == (DEFAULT_WIDTH, DEFAULT_HEIGHT)
    grid = plot_helix_grid([load(table_path), load(second)], cols=2)
    assert _png_size(out / "grid.png") == (grid.layout.meta[STATIC_SIZE_META][0], grid.layout.height)
    # a rendered 3D plot compresses far worse than a blank page of the same size
    assert (out / "helix.png").stat().st_size > 20_000


def test_plot_of_one_model_writes_no_grid_of_one(table_path: Path, tmp_path: Path):
    out = tmp_path / "one"
    res = runner.invoke(app, ["plot", str(table_path), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["helix.html", "plotly.min.js"]


def test_progress_bars_show_on_a_terminal(table_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    res = runner.invoke(app, ["plot", str(table_path), "--out", str(tmp_path)])
    assert res.exit_code == 0 and "loading" not in res.stderr  # not a terminal: no bar
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich treats the stream as a terminal
    res = runner.invoke(app, ["plot", str(table_path), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for stage in ("loading", "analysing", "writing figures"):
        assert stage in res.stderr, stage
    assert len(_summary_lines(res.stdout)) == 1  # the summary itself stays on stdout


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


def test_analyze_stops_the_helix_nulls_early_unless_told_to_draw_every_surrogate(tmp_path: Path):
    # a smooth random curve, which the nulls explain: by default each helix null stops once 10 surrogates
    # reach its rotation share (the reason says so); --all-surrogates draws all 199, with the same verdict
    t = np.arange(160)[:, None]
    kernel = np.exp(-0.5 * ((t - t.T) / 12.0) ** 2) + 1e-6 * np.eye(160)
    path = tmp_path / "curve.npy"
    np.save(path, np.linalg.cholesky(kernel) @ np.random.default_rng(6).standard_normal((160, 12)))
    rows = {}
    for flag in ("--sequential", "--all-surrogates"):
        res = runner.invoke(app, ["analyze", str(path), "--analyses", "helix", "--json", flag])
        assert res.exit_code == 0, res.output
        (rows[flag],) = json.loads(res.stdout)
    assert rows["--sequential"]["helix_verdict"] == rows["--all-surrogates"]["helix_verdict"] == "not a helix"
    assert "stopped after" in rows["--sequential"]["helix_reason"]
    assert "stopped" not in rows["--all-surrogates"]["helix_reason"]
    assert "199 surrogates" in rows["--all-surrogates"]["helix_reason"]


def test_analyze_csv_and_table(table_path: Path):
    res = runner.invoke(app, ["analyze", str(table_path), "--csv"])
    assert res.exit_code == 0, res.output
    header, first = res.stdout.strip().splitlines()[:2]
    assert header.startswith("model,kind,n_positions,n_columns,d_model,window,top1,top3")
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


def _hf_cache(root: Path, repo_id: str, commit: str, filename: str | None) -> Path:
    """A Hugging Face cache layout: refs/main -> commit, and optionally one snapshot file."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    if filename is not None:
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / filename).write_bytes(b"weights")
    return root


@pytest.fixture
def empty_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import huggingface_hub.constants

    hf = tmp_path / "hf-cache"
    hf.mkdir()
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pg-cache"))
    monkeypatch.setenv("POS_GEOMETRY_DATA", str(tmp_path / "no-real-tables"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hf))
    return hf


def test_info_gpt2(empty_caches: Path):
    res = runner.invoke(app, ["info", "gpt2-small"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    for text in (
        "openai-community/gpt2",
        "wpe.weight",
        "1024 × 768",
        "learned",
        "revisions",
    ):
        assert text in out, text
    assert re.search(r"available offline\s*│\s*no \(fetch with: pos-geometry fetch gpt2\)", out), out
    for place in ("pos_geometry cache", "HF cache", "data/tables", "real tables"):
        assert re.search(rf"not found\s*│\s*{place}: ", out), place


def test_info_sees_the_hf_cache(empty_caches: Path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    _hf_cache(empty_caches, "openai-community/gpt2", commit, "model.safetensors")
    res = runner.invoke(app, ["info", "gpt2"])
    assert res.exit_code == 0, res.output
    assert re.search(r"available offline\s*│\s*yes \(HF cache\)", res.stdout), res.stdout
    assert re.search(r"found\s*│\s*HF cache: \S+ \(commit 0123456789ab\)", res.stdout), res.stdout
    # a ref without the weight file is not a cached table
    other = "fedcba9876543210fedcba9876543210fedcba98"
    _hf_cache(empty_caches, "openai-community/gpt2-medium", other, None)
    res = runner.invoke(app, ["info", "gpt2-medium"])
    assert re.search(r"available offline\s*│\s*no \(fetch with: ", res.stdout), res.stdout


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


def test_reproduce_forwards_its_options_and_prints_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import pos_geometry.reproduction.runner as runner_module

    ckpt = tmp_path / "medium.npy"
    np.save(ckpt, _helix_table())
    seen: dict = {}

    class Result:
        def summary_text(self) -> str:
            return "variance_3d  reproduced"

    def fake(out, **kwargs):
        seen.update(out=out, **kwargs)
        kwargs["on_stage"]("looking for gpt2", 0, 2)
        return Result()

    monkeypatch.setattr(runner_module, "reproduce_blog_post", fake)
    res = runner.invoke(
        app,
        ["reproduce", "--out", str(tmp_path / "rep"), "--model", f"gpt2-medium={ckpt}", "--format", "html",
         "--data-dir", str(tmp_path), "--device", "cpu"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "variance_3d  reproduced"
    assert seen["out"] == tmp_path / "rep" and seen["data_dir"] == tmp_path
    assert seen["paths"] == {"gpt2-medium": ckpt} and seen["formats"] == ("html",)
    assert seen["online"] is False and seen["device"] == "cpu" and seen["tokens"] is None


def test_reproduce_data_dir_without_tables_is_one_clear_error(tmp_path: Path):
    res = runner.invoke(app, ["reproduce", "--out", str(tmp_path / "rep"), "--data-dir", str(tmp_path)])
    assert res.exit_code == 1
    assert res.stderr.startswith("error: --data-dir") and "gpt2_small_wpe.npy" in res.stderr
    assert "Traceback" not in res.output


def test_plot_decomposes_each_table_once(
    table_path: Path, tmp_path: Path, record_decompositions, monkeypatch
):
    """One PCA per table: the figure, the grid and the helix fit all draw on it (no exact/randomized mix)."""
    other = tmp_path / "other.npy"
    np.save(other, _helix_table(seed=2))
    calls = record_decompositions(monkeypatch)
    res = runner.invoke(app, ["plot", str(table_path), str(other), "--out", str(tmp_path / "figs")])
    assert res.exit_code == 0, res.output
    assert len(calls) == 2 and len(set(calls)) == 2, calls


def test_one_missing_model_does_not_stop_the_others(table_path: Path, tmp_path: Path):
    out = tmp_path / "figs"
    res = runner.invoke(app, ["plot", str(table_path), "no-such-model-xyz", "--out", str(out)])
    assert res.exit_code == 1
    assert sorted(p.name for p in out.iterdir()) == [
        "helix.html",
        "plotly.min.js",
    ]  # one model drawn: no grid of one
    assert "error: no-such-model-xyz:" in res.stderr and "1 of 2 model(s) failed" in res.stderr
    # every model failing leaves no empty folder behind
    empty = tmp_path / "never"
    res = runner.invoke(app, ["plot", "no-such-model-xyz", "--out", str(empty)])
    assert res.exit_code == 1 and not empty.exists()


def test_version_and_python_dash_m():
    import subprocess
    import sys

    import pos_geometry

    out = subprocess.run([sys.executable, "-m", "pos_geometry", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"pos-geometry {pos_geometry.__version__}"
    help_text = subprocess.run(
        [sys.executable, "-m", "pos_geometry", "--help"], capture_output=True, text=True
    )
    assert help_text.returncode == 0 and "atlas" in help_text.stdout


@pytest.mark.parametrize("columns", ["70", "1000"])
def test_help_keeps_sentences_whole(columns: str, monkeypatch: pytest.MonkeyPatch):
    """Each command's help wraps its paragraphs to the terminal, never at the docstring's own line ends:
    at 1000 columns every paragraph is one line; at 70 no line ends inside a word the docstring broke."""
    import inspect

    monkeypatch.setenv("COLUMNS", columns)
    for command in app.registered_commands:
        result = CliRunner().invoke(app, [command.callback.__name__, "--help"], terminal_width=int(columns))
        assert result.exit_code == 0, result.output
        lines = [" ".join(line.strip(" │").split()) for line in result.output.splitlines()]
        doc = inspect.cleandoc(command.callback.__doc__ or "")
        for paragraph in doc.split("\n\n"):
            text = " ".join(paragraph.split())
            if columns == "1000":
                assert any(text in line for line in lines), (command.callback.__name__, text)
            else:
                assert text in " ".join(lines), (command.callback.__name__, text)


def test_analyze_table_keeps_its_headers_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """At 100 columns no header is cut ("n_positio…"), and each verdict's reason is printed under the table,
    a "not run" or "does not apply" included (it was only in --json)."""
    monkeypatch.setenv("COLUMNS", "100")
    np.save(tmp_path / "line.npy", np.outer(np.arange(96.0), np.ones(4)) + np.eye(96, 4))
    sinusoid = tmp_path / "table.npy"
    from pos_geometry import sinusoidal

    np.save(sinusoid, sinusoidal(128, 16).numpy())
    result = CliRunner().invoke(app, ["analyze", f"sin={sinusoid}", f"line={tmp_path / 'line.npy'}"],
                                terminal_width=100)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    for header in ("positions", "verdict", "stable rank", "recurrence"):
        assert header in result.output
    why = [line for line in result.output.splitlines() if line.startswith(("sin:", "line:"))]
    assert any(line.startswith("sin: helix: not fitted") for line in why), why
    assert any(line.startswith("line: period: ") for line in why), why
    assert any(line.startswith("line: recurrence: ") for line in why), why


@pytest.mark.parametrize(
    ("load", "preset", "torch_loaded", "expected"),
    [
        (1.5, None, False, "PASSIVE"),  # busy (≥ half of 2 cores): passive waiting
        (0.3, None, False, None),  # idle: spinning is ~10% faster, left alone
        (1.5, "ACTIVE", False, "ACTIVE"),  # the user's choice wins
        (1.5, None, True, None),  # torch already imported: too late to matter, left alone
    ],
)
def test_process_entry_asks_openmp_to_wait_passively_on_a_busy_machine(
    monkeypatch, load, preset, torch_loaded, expected
):
    import os
    import sys

    from pos_geometry import cli

    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    if preset is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", preset)
    if not torch_loaded:
        monkeypatch.delitem(sys.modules, "torch", raising=False)
    cli._openmp_wait_policy()
    assert os.environ.get("OMP_WAIT_POLICY") == expected
