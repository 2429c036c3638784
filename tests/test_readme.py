"""The README's and the documentation site's code blocks run as written, offline, on a checkout with
``../shared`` beside it.

The site's blocks marked ``exec="on"`` run when it is built (``mkdocs build --strict`` in CI fails on any
error). Every other fenced block, of the README and of every page under ``docs/``, is accounted for: the Quick start (Python) and the offline command-line
examples are executed here, and the value each line's comment promises (``# 0.9039``) is checked;
every other block or command is listed below with the reason it is not run here (it needs the
network, a model that is a placeholder, or it is the test suite itself). A new README command that
is not classified fails the test, so the README cannot drift from what runs.

``.venv/bin/pos-geometry ARGS`` is run in process as ``pos_geometry.cli.main`` (the
``[project.scripts]`` entry point, checked below) from a scratch folder that has the real
``shared/`` folder beside it, so relative paths such as ``../shared/data/real/...`` resolve as they
would in the checkout and nothing is written into the repository.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# the README first: its first Python block is the Quick start
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]
CLI = ".venv/bin/pos-geometry"

# (first words of a command, why it is not run here); a command matching none of these is run.
NOT_RUN = {
    "bash scripts/setup.sh": "creates the virtualenv and runs the job or the whole suite (CI runs it)",
    f"{CLI} reproduce": "the reproduction itself: tests/reproduction/test_runner.py runs it end to end",
    f"{CLI} atlas": "needs the q/k weights, fetched online (tests/atlas covers the command offline)",
    f"{CLI} fetch": "downloads from the hub (tests/sources/test_fetch.py covers it against a loopback hub)",
    f"{CLI} hidden": "path/to/model is a placeholder (tests/hidden covers the command on a built model)",
    f"{CLI} sweep": "reads checkpoints from the hub (tests/sweeps covers it against a loopback hub)",
    f"{CLI} intervene": "runs SmolLM2 nine times over 8 contexts (tests/interventions covers the command; notebook 03 runs it)",
    "dask ": "starts a Dask cluster",
    ".venv/bin/python": "the test suite and the benchmarks",
    ".venv/bin/ruff": "lint, run by CI",
    ".venv/bin/mkdocs": "builds the documentation site (CI runs mkdocs build --strict)",
}
# Python blocks by their first line: the Quick start is run; the others need the network or a model.
PYTHON_NOT_RUN = {
    "atlas = pg.rotary_atlas": "reads Pythia's q/k weights from the hub",
    "lean = pg.plane_preference": "tests the atlas of the block above (Pythia's, from the hub; tests/atlas/test_plane_preference.py runs it)",
    "# SmolLM2's real atlas": "reads ../shared/data/real_models (tests/sources/gguf/test_gguf.py checks this atlas)",
    "view = pg.position_qk_atlas": "runs GPT-2 on a corpus for the hidden path (the direct view above it runs when the site is built)",
    "from pos_geometry.plotting import plot_helix": "the Quick start's figure, which the Quick start test saves",
    "res = pg.hidden_positions": "path/to/model is a placeholder",
    "model = pg.open_model": "path/to/model is a placeholder (tests/hidden/test_open_model.py runs these calls)",
    "res = pg.sweep": "reads 61 checkpoints from the hub",
    "from distributed import Client": "needs a Dask cluster",
    "from pos_geometry.interventions import": "runs whole models (tests/interventions and notebook 03 run these calls)",
    "card = pg.card": "reads GPT-2's real table and attention weights (tests/cards/test_real_cards.py makes this card)",
    "c = pg.compare": "needs a card made before (tests/comparison/test_real_comparison.py compares the real models)",
}


def _blocks(language: str) -> list[str]:
    """The plain (not executed at build time) fenced blocks of ``language``, README first, then every page."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def test_ci_runs_the_readme_test_command_exactly() -> None:
    readme = README.read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if line.startswith("bash scripts/setup.sh --dev &&"))
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci and "mkdocs build --strict" in "\n".join(ci)


def _commands() -> list[str]:
    """Every command line of the bash blocks, without its trailing comment."""
    lines = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            line = re.split(r"\s{2,}#|^#", line)[0].strip()
            if line:
                lines.append(line)
    return lines


def _skip_reason(command: str) -> str | None:
    return next((why for prefix, why in NOT_RUN.items() if command.startswith(prefix)), None)


@pytest.fixture
def beside_shared(real_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working folder with ``../shared`` pointing at the real one."""
    (tmp_path / "shared").symlink_to(real_data_dir.parents[1], target_is_directory=True)
    work = tmp_path / "checkout"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("COLUMNS", "200")  # rich tables unwrapped, as on a wide terminal
    return work


def test_every_block_and_command_is_accounted_for() -> None:
    assert _blocks("bash") and _blocks("python")
    scripts = (REPO / "pyproject.toml").read_text().split("[project.scripts]")[1].split("[")[0]
    assert scripts.strip() == 'pos-geometry = "pos_geometry.cli:main"'  # what .venv/bin/pos-geometry runs
    from pos_geometry.cli import app

    known = {c.name or c.callback.__name__ for c in app.registered_commands}
    for command in _commands():
        if "pos-geometry" in command:  # shown runnable after scripts/setup.sh, and a real command
            assert f"{CLI} " in command, f"{command!r}: write it as {CLI} (setup.sh does not activate .venv)"
            sub = command.split(f"{CLI} ")[1].split()[0]
            assert sub in known, f"{command!r}: no command {sub!r} (known: {sorted(known)})"
        elif _skip_reason(command) is None:
            pytest.fail(f"README command {command!r} is neither run by this test nor listed in NOT_RUN")
    for block in _blocks("python")[1:]:
        first = block.splitlines()[0]
        assert any(first.startswith(p) for p in PYTHON_NOT_RUN), f"unclassified Python block: {first!r}"


def test_examples_write_only_under_git_ignored_folders() -> None:
    """Every ``--out`` of a README command and every file a Python block saves lies under ``out/`` or
    ``reproduction/``, both git-ignored, so running the examples leaves the checkout clean."""
    ignored = (REPO / ".gitignore").read_text().splitlines()
    assert "/out/" in ignored and "/reproduction/" in ignored
    outs = [c.split("--out ")[1].split()[0] for c in _commands() if "--out " in c]
    saved = [
        m
        for b in _blocks("python")
        for m in re.findall(r"save_figure\([^\n]*?\"([^\"]+)\"|\bout=\"([^\"]+)\"", b)
    ]
    saved = [a or b for a, b in saved]
    assert len(outs) >= 8 and saved
    for path in outs + saved:
        assert path.split("/")[0] in ("out", "reproduction"), f"README writes {path!r} into the checkout"


@pytest.mark.slow
def test_cli_examples_run_offline(beside_shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pos_geometry.analysis.pipeline import analyze
    from pos_geometry.cli import app

    # The size of the nulls does not decide whether a README command runs offline, and these commands
    # promise no p-value: 19 surrogates instead of 199 (alpha 0.05, the smallest it can reach) make
    # `analyze` and `plot` of GPT-2 ~10x cheaper. The Quick start test below runs the defaults and
    # checks the p-value it promises.
    monkeypatch.setitem(analyze.__kwdefaults__, "n_surrogates", 19)
    monkeypatch.setitem(analyze.__kwdefaults__, "alpha", 0.05)

    runner = CliRunner()
    ran = []
    for command in _commands():
        if not command.startswith(CLI) or _skip_reason(command):
            continue
        args = shlex.split(command)[1:]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, f"{command!r} failed offline:\n{res.output}"
        ran.append((" ".join(args[:2]) if args[0] == "info" else args[0], res.stdout))
    out = dict(ran)
    assert set(out) == {"models", "info gpt2", "info ../shared/data/real_models", "analyze", "plot"}
    assert "gpt2" in out["models"] and "pythia" not in out["models"]
    assert "real tables" in out["info gpt2"]  # info says where gpt2's table is found offline
    assert "rotary" in out["info ../shared/data/real_models"]  # info PATH reads the GGUF's headers
    rows = json.loads(out["analyze"])
    assert [r["model"] for r in rows] == ["gpt2", "pythia-70m"] and round(rows[0]["top3"], 4) == 0.9039
    assert (beside_shared / "out/figs" / "gpt2.html").is_file() and (
        beside_shared / "out/figs" / "plotly.min.js"
    ).is_file()


def _promised(comment: str) -> object | None:
    """The literal a line's comment starts with (``0.9039``, ``('helix', 0.005)``), or None."""
    match = re.match(r"\s*(\([^)]*\)|-?\d+(?:\.\d+)?)", comment)
    return ast.literal_eval(match[1]) if match else None


def _close(got: object, promised: object) -> bool:
    if isinstance(promised, tuple):
        return isinstance(got, tuple) and len(got) == len(promised) and all(map(_close, got, promised))
    if isinstance(promised, float):
        digits = len(repr(promised).split(".")[1])
        return round(float(got), digits) == promised
    return got == promised


@pytest.mark.slow
def test_quick_start_runs_and_prints_what_it_says(beside_shared: Path) -> None:
    block = _blocks("python")[0]
    assert block.startswith("import pos_geometry as pg")
    namespace: dict[str, object] = {}
    checked = 0
    for line in block.splitlines():  # one statement per line, as a reader would type them
        code, _, comment = line.partition("  #")
        if not code.strip():
            continue
        (statement,) = ast.parse(code).body
        if not isinstance(statement, ast.Expr):
            exec(compile(code, "README.md", "exec"), namespace)
            continue
        got = eval(compile(code.strip(), "README.md", "eval"), namespace)
        promised = _promised(comment)
        if promised is not None:
            assert _close(got, promised), f"README says {code.strip()} is {promised!r}; it is {got!r}"
            checked += 1
    assert checked >= 4  # 0.9039, 0.9511, ('helix', 0.005), (1.83, 559.4)
    assert (beside_shared / "out/gpt2_helix.html").is_file()


def test_the_recurrence_row_is_what_fit_recurrence_gives(beside_shared: Path) -> None:
    """The README's GPT-2 recurrence row (components and the one rotation's period) is measured, not typed:
    the same numbers as notebook 02 prints."""
    import pos_geometry as pg

    verdicts = REPO / "docs" / "guide" / "verdicts.md"
    row = next(
        line
        for line in verdicts.read_text(encoding="utf-8").splitlines()
        if line.startswith("| recurrence |")
    )
    components = int(re.search(r"(\d+) components", row)[1])
    period = float(re.search(r"period ≈ (\d+)", row)[1])
    fit = pg.fit_recurrence(pg.load("gpt2"), n_surrogates=0)
    ((measured, _modulus),) = fit.rotation_pairs()
    assert fit.n_components == components and round(measured) == period
