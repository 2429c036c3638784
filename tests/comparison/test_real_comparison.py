"""The comparison of the real models here: GPT-2 small (its table and attention weights in ../shared/data/real),
GPT-1's table and SmolLM2-135M-Instruct's GGUF (../shared/data/real_models). Every cell's numbers are those of
the card the comparison made for the model, the rotary ones those of the atlas run here again, and the page
renders in headless Chromium with a clean console."""

from __future__ import annotations

import json

import pytest

import pos_geometry as pg
from pos_geometry.comparison.cells import CLAIMS

pytestmark = pytest.mark.slow  # about a minute: CI runs this module after the default suite (.ci/run)


@pytest.fixture(scope="module")
def real_comparison(real_data_dir, smollm2_gguf, tmp_path_factory):
    out = tmp_path_factory.mktemp("real_comparison") / "page"
    models = ["gpt2", str(real_data_dir / "gpt1_openai_positions_embed.npy"), str(smollm2_gguf)]
    return pg.compare(models, out, fast=True, n_sequences=2, seq_len=64, device="cpu"), out


def _card(out, index):
    (folder,) = [p for p in (out / "cards").iterdir() if p.name.startswith(f"{index + 1:02d}-")]
    return json.loads((folder / "card.json").read_text())


def test_every_cell_is_the_card_s_own(real_comparison):
    from pos_geometry.comparison.cells import card_cells

    c, out = real_comparison
    assert [m.kind for m in c.models] == ["learned table", "table file", "rotary"]
    for i in range(len(c.models)):
        card = _card(out, i)
        assert c.cells[i] == card_cells(card)
        for claim, cell in zip(c.claims, c.cells[i], strict=True):
            section = next(s for s in card["sections"] if s["key"] == CLAIMS[claim][0])
            if section["status"] != "ran":
                assert cell.status == section["status"]
    gpt2 = _card(out, 0)
    table = next(s for s in gpt2["sections"] if s["key"] == "table")["values"]
    assert c.cells[0][0].values["p_value"] == table["helix"]["p_value"] == 0.005
    assert c.cells[0][0].values["turns"] == table["helix"]["turns"]
    assert c.cells[0][0].status == "beats its null" and c.cells[1][0].status == "not significant"
    assert c.cells[1][1].values["periods"] == pytest.approx([6.30636786], abs=1e-6)  # GPT-1's period


def test_the_rotary_numbers_are_the_atlas_s(real_comparison, smollm2_gguf):
    c, _ = real_comparison
    atlas = pg.rotary_atlas(smollm2_gguf, fold_norm=True, device="cpu")
    cell = c.cells[2][c.claims.index("rotary plane use")]
    assert cell.values["all"]["short_share_mean"] == pytest.approx(float(atlas.short_share.mean()), abs=1e-12)
    (series,) = c.series["rotary"]
    assert series["usage"] == pytest.approx(atlas.layer_usage.mean(dim=0).tolist(), abs=1e-12)
    assert series["span"] == 8192


def test_the_real_comparison_renders_in_a_browser(real_comparison, browser, load_page):
    _, out = real_comparison
    check = (
        "() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => (p._fullData || []).length)"
    )
    traces, requests, errors = load_page(browser, out / "index.html", check)
    assert errors == [] and [u for u in requests if not u.startswith("file://")] == []
    assert len(traces) == 3 and min(traces) > 0  # rotary use, the residual stream, attention locality
