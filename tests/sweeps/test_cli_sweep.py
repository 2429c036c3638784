"""``pos-geometry sweep`` over the loopback hub: tables and figures written, a re-run resumes, bad input is one line."""

from __future__ import annotations

import json

import pandas as pd
from typer.testing import CliRunner

from pos_geometry.cli import app


def test_sweep_command_writes_tables_and_resumes(hub, tmp_path):
    out = tmp_path / "sweep"
    args = ["sweep", hub.repo, "--revisions", "every:10", "--analyses", "cheap", "--out", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    frame = pd.read_csv(out / "metrics.csv")
    picked = list(hub.all[::10]) + ([hub.all[-1]] if (len(hub.all) - 1) % 10 else [])
    assert list(frame["revision"]) == picked
    assert pd.read_parquet(out / "metrics.parquet")["top3_ratio"].tolist() == frame["top3_ratio"].tolist()
    meta = json.loads((out / "sweep.json").read_text())
    assert (
        meta["repo_id"] == hub.repo and meta["records"][0]["provenance"]["commit"] == hub.commits[picked[0]]
    )
    assert (out / "metrics.html").is_file() and (out / "helix.html").is_file()
    assert f"{hub.repo}: {len(picked)}/{len(picked)} checkpoints ok" in first.stdout

    hub.server.clear_log()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and f"{len(picked)} resumed" in again.stdout
    assert not any(r.range for r in hub.server.requests())


def test_sweep_command_bad_revisions_is_one_line(hub, tmp_path):
    result = CliRunner().invoke(app, ["sweep", hub.repo, "--revisions", "every:0", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "positive integer" in result.output and "Traceback" not in result.output
