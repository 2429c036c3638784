"""The card degrades section by section: a table ``analyze`` accepts but too narrow for a 3D view, a table of
too few positions, a folder holding a config and no weights; each gets a card whose sections say why they
did not run, never an abort naming an API the user did not call."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pos_geometry as pg


@pytest.mark.parametrize("shape", [(8, 1), (64, 2)])
def test_a_table_with_fewer_than_three_components_gets_its_card_without_the_3d_view(tmp_path, shape):
    path = tmp_path / "narrow.npy"
    np.save(path, np.random.default_rng(0).standard_normal(shape).cumsum(0))
    c = pg.card(path, progress=False, device="cpu", fast=True)
    table = c.section("table")
    assert table.status == "ran" and [stem for stem, _, _ in table.figures] == ["table_spectrum"]
    assert dict(table.rows)["3D view"].startswith(f"not drawn: the table has {shape[1]} principal component")
    assert "refit with pca" not in json.dumps(c.to_dict())


@pytest.mark.parametrize("n_positions", [1, 2])
def test_a_table_of_too_few_positions_gets_a_card_whose_table_section_says_why(tmp_path, n_positions):
    path = tmp_path / "short.npy"
    np.save(path, np.ones((n_positions, 8)))
    c = pg.card(path, progress=False, device="cpu", fast=True)
    table = c.section("table")
    assert (
        table.status == "does not apply"
        and f"the table ({n_positions} × 8) cannot be analysed" in table.reason
    )
    assert c.section("identity").status == "ran"


def test_a_folder_with_a_config_and_no_weights_gets_a_card_of_what_its_config_says(tmp_path):
    folder = tmp_path / "config_only"
    folder.mkdir()
    config = {
        "model_type": "gpt2",
        "n_positions": 64,
        "n_embd": 16,
        "n_layer": 1,
        "n_head": 2,
        "vocab_size": 10,
    }
    (folder / "config.json").write_text(json.dumps(config))
    c = pg.card(folder, progress=False, device="cpu")
    assert c.kind == "learned table"
    status = {s.key: s.status for s in c.sections}
    assert status == {"identity": "ran", "table": "not available", "rotary": "does not apply",
                      "attention": "not available", "residual": "not available", "causal": "not available"}  # fmt: skip
    assert all("weights" in c.section(k).reason for k in ("table", "attention", "residual", "causal"))
    assert dict(c.section("identity").rows)["context"] == "64"
