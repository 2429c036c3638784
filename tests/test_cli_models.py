"""``pos-geometry models [FILTER]``: exactly the matching rows of the model table, without torch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pos_geometry.cli import app
from pos_geometry.registry import all_specs

runner = CliRunner()
REPO_ROOT = Path(__file__).resolve().parents[1]


def _expected(text: str) -> list[str]:
    """Rows whose name, alias, repo, family, kind or model_type contain ``text`` (any case), in table order."""
    t = text.lower()
    return [
        s.name
        for s in all_specs()
        if any(t in f.lower() for f in (s.name, s.repo_id, s.family, s.kind, s.model_type, *s.aliases))
    ]


@pytest.mark.parametrize("text", ["gpt2", "PYTHIA-1", "rotary", "facebook/", "gpt-1", "bert"])
def test_json_holds_exactly_the_matching_rows(text: str) -> None:
    res = runner.invoke(app, ["models", text, "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["name"] for r in rows] == _expected(text) and rows
    by_name = {s.name: s for s in all_specs()}
    for r in rows:
        spec = by_name[r["name"]]
        assert (r["repo_id"], r["family"], r["kind"]) == (spec.repo_id, spec.family, spec.kind)
        assert (r["n_positions"], r["d_model"], tuple(r["aliases"])) == (
            spec.n_positions,
            spec.d_model,
            spec.aliases,
        )


def test_the_table_lists_each_matching_row_once() -> None:
    res = runner.invoke(app, ["models", "gpt2"])
    assert res.exit_code == 0, res.output
    names = re.findall(r"^│ (\S+)\s+│", res.stdout, flags=re.M)
    assert names == _expected("gpt2")
    assert _expected("gpt-1") == ["openai-gpt"]  # found by its alias
    everything = runner.invoke(app, ["models"])
    assert re.findall(r"^│ (\S+)\s+│", everything.stdout, flags=re.M) == [s.name for s in all_specs()]
    assert f"model table: {len(all_specs())} model(s)" in everything.stdout
    assert "1024 × 768" in res.stdout and "openai-community/gpt2" in res.stdout


def test_no_match_is_one_line_with_the_closest_names() -> None:
    res = runner.invoke(app, ["models", "gtp2-medum"])
    assert res.exit_code == 1
    assert "no row of the model table" in res.stderr and "gpt2-medium" in res.stderr
    assert "Traceback" not in res.output


def test_unknown_names_point_to_the_models_command() -> None:
    res = runner.invoke(app, ["info", "gtp2-medum"])
    assert res.exit_code == 1 and "`pos-geometry models`" in res.stderr


def test_models_does_not_import_torch() -> None:
    code = (
        "import sys; sys.argv = ['pos-geometry', 'models', 'opt']\n"
        "from pos_geometry.cli import app\n"
        "try:\n    app()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "heavy = sorted(m for m in ('torch', 'numpy', 'scipy', 'plotly') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "opt-125m" in done.stdout
