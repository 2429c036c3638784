"""``pos-geometry intervene`` in-process: what it writes equals the Python API; bad specs and partial models."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry.cli import app
from pos_geometry.interventions import Rank, parse_edits


def test_intervene_writes_json_csv_and_the_sweep_figure(tiny_gpt2, tokens, tmp_path):
    np.save(tmp_path / "ids.npy", tokens)
    out = tmp_path / "out"
    args = [
        "intervene",
        str(tiny_gpt2),
        "--corpus",
        str(tmp_path / "ids.npy"),
        "--edit",
        "rank:1,3",
        "--edit",
        "mean",
    ]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--n-bootstrap", "100", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} >= {
        "interventions.json",
        "interventions.csv",
        "interventions.html",
    }
    rows = list(csv.DictReader((out / "interventions.csv").open()))
    assert [r["edit"] for r in rows] == [
        "rank 1 PCA reconstruction of the table", "rank 3 PCA reconstruction of the table", "table replaced by its mean row",
    ]  # fmt: skip
    expected = pg.intervene(tiny_gpt2, tokens, Rank(3), device="cpu", n_bootstrap=100, attention=False)
    np.testing.assert_allclose(float(rows[1]["delta"]), expected.delta, rtol=1e-9)
    np.testing.assert_allclose(
        [float(rows[1]["delta_low"]), float(rows[1]["delta_high"])], expected.delta_interval
    )
    data = json.loads((out / "interventions.json").read_text())
    assert len(data["results"]) == 3 and data["results"][0]["provenance"]["processing"][-1].startswith(
        "edit: rank 1"
    )
    assert "Δloss" in result.output and "wrote 1 figure (html), 2 data files (csv, json)" in result.output


def test_bad_edit_specs_suggest_and_state_the_rule(tiny_gpt2, tmp_path):
    out = tmp_path / "out"
    base = ["intervene", str(tiny_gpt2), "--corpus", str(tmp_path / "x.npy"), "--out", str(out), "--edit"]
    for spec, words in (("rnak:2", "Did you mean rank"), ("rank", "needs values"), ("swap:3", "takes no value"),
                        ("rank:two", "rank:K"), ("scale:1e-300", "between 1e-06"), ("scale:nan", "number > 0"),
                        ("rope:linear:0", "between 1e-06"), ("rebase:inf", "rope_theta"),
                        ("scale:2@", "a scope is")):  # fmt: skip
        result = CliRunner().invoke(app, [*base, spec])
        assert result.exit_code == 1 and words in result.output, (spec, result.output)
    assert not out.exists()  # nothing written for a failed command


def test_a_position_table_alone_says_what_is_missing(real_data_dir, tokens, tmp_path):
    np.save(tmp_path / "ids.npy", tokens)
    folder = real_data_dir / "gpt2_small_attention"
    if not folder.is_dir():
        pytest.skip(f"the real GPT-2 attention folder is not at {folder}")
    args = [
        "intervene",
        str(folder),
        "--corpus",
        str(tmp_path / "ids.npy"),
        "--edit",
        "rank:3",
        "--out",
        str(tmp_path / "o"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "lacks" in result.output and "weight(s) the whole model needs" in result.output


def test_parse_edits_builds_one_edit_per_value():
    edits = parse_edits(["planes-slow:1,4", "rope:yarn:2,4", "identity"])
    assert [e.label for e in edits] == [
        "the 1 slowest rotation planes removed", "the 4 slowest rotation planes removed",
        "rope factor=2.0, rope_type=yarn", "rope factor=4.0, rope_type=yarn", "identity (no edit)",
    ]  # fmt: skip


def test_a_table_file_says_the_whole_model_is_needed(tokens, tmp_path):
    np.save(tmp_path / "wpe.npy", np.zeros((48, 32), np.float32))
    np.save(tmp_path / "ids.npy", tokens)
    args = ["intervene", str(tmp_path / "wpe.npy"), "--corpus", str(tmp_path / "ids.npy"), "--edit", "rank:3"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")])
    assert (
        result.exit_code == 1 and "is a single .npy file" in result.output and "whole model" in result.output
    )


def test_intervene_defaults_to_the_text_and_says_what_is_missing(tiny_gpt2, tmp_path, monkeypatch):
    # the default corpus is the card's text; a model without a tokenizer cannot read it: one line, the fix
    args = ["intervene", str(tiny_gpt2), "--edit", "shift:3", "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "no tokenizer" in result.output and "Traceback" not in result.output
    # and where the text itself is missing (an install without the checkout's data), it says that
    monkeypatch.setenv("POS_GEOMETRY_CORPUS", str(tmp_path / "no-such-book.txt"))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "none was given and the default text" in result.output
    assert "--corpus FILE" in result.output and not (tmp_path / "o").exists()
