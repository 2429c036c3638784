"""``compare``: every cell is its model's card's decision and number, read from ``card.json``; cards are made
through the results cache; a card of another format is refused; the page and its Markdown are escaped."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import pos_geometry as pg
from pos_geometry.cards.result import CARD_FORMAT
from pos_geometry.comparison.cells import CLAIMS
from pos_geometry.errors import InvalidArgumentError

KINDS = ("learned", "rotary", "per_type", "no_table", "table_file")


@pytest.fixture(scope="module")
def card_folders(kind_cards, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compared_cards")
    out = {}
    for kind in KINDS:
        kind_cards[kind].save(root / kind)
        out[kind] = root / kind
    return out


@pytest.fixture(scope="module")
def compared(card_folders, tmp_path_factory):
    out = tmp_path_factory.mktemp("comparison") / "page"
    return pg.compare([card_folders[k] for k in KINDS], out), out


def _cell(c, kind, claim):
    return c.cells[KINDS.index(kind)][c.claims.index(claim)]


def _line(card, prefix):
    return next(v for s in card.sections for v in s.verdicts if v.text.startswith(prefix))


def test_each_cell_is_the_decision_and_the_numbers_of_the_model_s_own_card(kind_cards, compared):
    c, _ = compared
    assert [m.kind for m in c.models] == [kind_cards[k].kind for k in KINDS]
    assert c.claims == tuple(CLAIMS) and all(len(row) == len(CLAIMS) for row in c.cells)
    table = kind_cards["table_file"]  # a helix written as a bare table
    helix = table.section("table").values["helix"]
    cell = _cell(c, "table_file", "learned-table shape")
    assert cell.status == _line(table, "learned table:").status == "beats its null"
    assert cell.values["verdict"] == helix["verdict"] == "helix" and cell.p_value == helix["p_value"]
    assert (
        cell.values["turns"] == list(helix["turns"])
        and cell.values["top3"] == table.section("table").values["top3"]
    )
    assert f"{helix['turns'][0]:.2f} turns of period {helix['periods'][0]:.0f}" in cell.text
    learned = kind_cards[
        "learned"
    ]  # its tiny random table is a line: the helix does not apply, and the cell says so
    line = _line(learned, "learned table:")
    cell = _cell(c, "learned", "learned-table shape")
    assert cell.status == line.status == "does not apply" and cell.text in line.text
    rotary = kind_cards["rotary"].section("rotary").values["all"]
    cell = _cell(c, "rotary", "rotary plane use")
    # 4 planes, 2 fast: 6 subsets, so no head's exact permutation p is below 1/6 and none leans
    assert cell.status == kind_cards["rotary"].section("rotary").verdicts[0].status == "not significant"
    assert cell.values["all"]["short_share_mean"] == rotary["short_share_mean"]
    assert cell.values["all"]["heads_leaning"] == rotary["heads_leaning"] == 0
    assert f"0 of {rotary['heads_tested']} heads lean on them (Holm)" in cell.text
    assert f"{rotary['short_share_mean']:.2f}" in cell.text
    per_type = kind_cards["per_type"].section("rotary").values
    assert set(_cell(c, "per_type", "rotary plane use").values) == set(per_type) and len(per_type) == 2
    offsets = kind_cards["rotary"].section("attention").values["by_offset"]
    cell = _cell(c, "rotary", "attention locality")
    assert cell.values["local_heads"] == offsets["local_heads"]
    assert cell.values["uniform_local_mass"] == offsets["uniform_local_mass"]
    assert cell.values["mean_local_mass"] == pytest.approx(float(offsets["local_mass"].mean()), abs=1e-12)
    edits = kind_cards["rotary"].section("causal").values["edits"]
    cell = _cell(c, "rotary", "causal edits")
    assert [e["delta"] for e in cell.values["edits"]] == [e["delta"] for e in edits]
    assert [tuple(e["interval"]) for e in cell.values["edits"]] == [tuple(e["interval"]) for e in edits]


def test_a_section_that_did_not_run_is_a_cell_with_its_status_and_reason(kind_cards, compared):
    c, _ = compared
    for kind in KINDS:
        card = kind_cards[kind]
        for claim, (key, *_rest) in CLAIMS.items():
            section = card.section(key)
            if section.status != "ran":
                cell = _cell(c, kind, claim)
                assert cell.status == section.status and cell.text and cell.text in section.reason
    assert _cell(c, "no_table", "rotary plane use").status == "does not apply"
    assert _cell(c, "rotary", "QK position term").status == "does not apply"  # no learned table to read


def test_compare_json_holds_the_numbers_of_card_json(compared, card_folders):
    c, out = compared
    data = json.loads((out / "compare.json").read_text())
    assert data["type"] == "Comparison" and data["format"] == 1
    card = json.loads((card_folders["rotary"] / "card.json").read_text())
    rotary = next(s for s in card["sections"] if s["key"] == "rotary")["values"]["all"]
    i, j = KINDS.index("rotary"), list(CLAIMS).index("rotary plane use")
    assert data["cells"][i][j]["values"]["all"]["short_share_mean"] == rotary["short_share_mean"]
    series = next(s for s in data["series"]["rotary"] if s["model"] == c.models[i].label)
    assert series["usage"] == rotary["plane_usage"]
    assert series["wavelength_over_span"] == [w / rotary["span"] for w in rotary["wavelengths"]]
    residual = next(s for s in card["sections"] if s["key"] == "residual")["values"]["metrics"]
    drawn = next(s for s in data["series"]["residual"] if s["model"] == c.models[i].label)
    assert drawn["positional_share"] == [r["positional_share"] for r in residual]
    assert drawn["depth"][0] == 0 and drawn["depth"][-1] == 1


def test_the_policy_counts_every_test_on_the_page(kind_cards, compared):
    c, _ = compared
    tested = [v for k in KINDS for v in kind_cards[k].verdicts if v.tested]
    assert f"each of the {len(tested)} tests with a p-value across the {len(KINDS)} cards" in c.policy


def test_a_card_of_another_format_is_refused_with_how_to_make_it_again(card_folders, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    data = json.loads((card_folders["table_file"] / "card.json").read_text())
    del data["format"]
    (old / "card.json").write_text(json.dumps(data))
    with pytest.raises(InvalidArgumentError, match=r"card format none.*--force"):
        pg.compare([old, card_folders["learned"]])
    with pytest.raises(InvalidArgumentError, match="two or more"):
        pg.compare([card_folders["learned"]])


def test_a_folder_that_is_not_a_comparison_s_is_refused_before_any_work(card_folders, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="not a comparison's"):
        pg.compare([card_folders["learned"], card_folders["rotary"]], tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_models_get_their_cards_through_the_results_cache(kind_models, tmp_path, monkeypatch):
    import pos_geometry.cards

    helix, _ = kind_models["table_file"]
    learned, tokens = kind_models["learned"]
    args = [str(helix), str(learned)]
    first = pg.compare(args, tmp_path / "a", corpus=tokens, fast=True, device="cpu")
    assert [m.origin for m in first.models] == ["computed", "computed"]
    cards = sorted(p.name for p in (tmp_path / "a" / "cards").iterdir() if not p.name.startswith("."))
    assert cards == ["01-helix.npy", "02-learned"]  # (and each card folder's lock file, hidden)
    made = json.loads((tmp_path / "a" / "cards" / "02-learned" / "card.json").read_text())
    assert made["format"] == CARD_FORMAT and made["fast"] is True

    def no_card(*a, **k):
        raise AssertionError("a cached card was computed again")

    monkeypatch.setattr(pos_geometry.cards, "card", no_card)  # what a comparison calls to make a card
    again = pg.compare(args, tmp_path / "b", corpus=tokens, fast=True, device="cpu")
    assert [m.origin for m in again.models] == ["results cache", "results cache"]
    assert again.cells == first.cells
    fewer = pg.compare(args[::-1], tmp_path / "a", corpus=tokens, fast=True, device="cpu")  # the same folder
    cards = sorted(p.name for p in (tmp_path / "a" / "cards").iterdir() if not p.name.startswith("."))
    assert cards == ["01-learned", "02-helix.npy"]  # the earlier comparison's cards are gone, not left beside
    assert [m.origin for m in fewer.models] == ["results cache", "results cache"]


def test_the_page_warns_when_the_models_were_measured_differently(card_folders, kind_models, tmp_path):
    learned, tokens = kind_models["learned"]
    fast = tmp_path / "fast"
    pg.card(learned, tokens, fast=True, device="cpu", progress=False).save(fast)
    c = pg.compare([card_folders["learned"], fast])
    assert any(w.startswith("fast and full cards are mixed") for w in c.warnings)
    assert c.models[0].label != c.models[1].label  # the same model twice: two labels


def test_names_and_revisions_are_read_as_written():
    from pos_geometry.comparison.inputs import split_revision
    from pos_geometry.comparison.series import training_step

    assert split_revision("EleutherAI/pythia-70m@step3000") == ("EleutherAI/pythia-70m", "step3000")
    assert split_revision("gpt2") == ("gpt2", None)
    with pytest.raises(InvalidArgumentError, match="MODEL@REVISION"):
        split_revision("gpt2@")
    assert [training_step(r) for r in ("step3000", "global_step12", "ckpt-5", "main", None)] == [
        3000,
        12,
        5,
        None,
        None,
    ]


def test_a_model_at_several_steps_gets_its_numbers_against_the_step():
    from pos_geometry.comparison.cells import Cell
    from pos_geometry.comparison.inputs import CardEntry
    from pos_geometry.comparison.series import _revisions

    entries = [CardEntry(f"m@step{s}", "m", f"step{s}", {}, "computed", Path(".")) for s in (2000, 1000)]
    cells = [
        (Cell("rotary plane use", "descriptive", "", None, {"all": {"short_share_mean": x}}),)
        for x in (0.4, 0.3)
    ]
    (found,) = _revisions(["m@step2000", "m@step1000"], entries, cells)
    assert found["steps"] == [1000, 2000]
    assert found["numbers"] == {"rotary plane use all: short_share_mean": [0.3, 0.4]}


def test_the_page_and_its_markdown_show_untrusted_names_as_text(hostile_cards, card_folders, tmp_path):
    folder, _ = hostile_cards["rotary"]
    c = pg.compare([folder, card_folders["learned"]], tmp_path / "page")
    page = (tmp_path / "page" / "index.html").read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    md = (tmp_path / "page" / "compare.md").read_text()
    assert "\n## Verdicts\n\n- [measured]" not in md and "<img" not in md
    assert md.count("\n## ") == 2  # Models and Verdicts: no heading smuggled in by a name
    assert all(math.isfinite(m) for s in c.series["locality"] for m in s["local_mass"])


def test_the_command_prints_each_claim_and_writes_the_page(card_folders, tmp_path):
    from typer.testing import CliRunner

    from pos_geometry.cli import app

    result = CliRunner().invoke(
        app,
        ["compare", str(card_folders["learned"]), str(card_folders["rotary"]), "--out", str(tmp_path / "c")],
    )
    assert result.exit_code == 0, result.output
    assert "learned: learned table (its card: card folder)" in result.output
    assert "  rotary plane use: learned [does not apply]" in result.output
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == [
        "compare.json",
        "compare.md",
        "index.html",
        "plotly.min.js",
    ]
