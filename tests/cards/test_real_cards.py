"""The real cards: GPT-2 small (its table and attention weights in ../shared/data/real) and SmolLM2-135M-Instruct
(its GGUF in ../shared/data/real_models). Every verdict line is checked against the function it comes from,
run here again on its own."""

from __future__ import annotations

import pytest

import pos_geometry as pg
from pos_geometry.cards.model_sections import local_mass
from pos_geometry.hidden.reading import residual_reading

pytestmark = pytest.mark.slow  # about a minute: CI runs this module after the default suite (.ci/run)


@pytest.fixture(scope="module")
def gpt2_card(real_data_dir):
    return pg.card("gpt2", fast=True, device="cpu", progress=False)


def test_gpt2_card_states_the_helix_of_its_real_table(gpt2_card):
    a = pg.analyze(pg.load("gpt2"), progress=False)
    table = gpt2_card.section("table")
    assert gpt2_card.kind == "learned table" and table.status == "ran"
    assert table.values["helix"]["verdict"] == a.helix.verdict == "helix"
    assert table.values["helix"]["p_value"] == a.helix.p_value == 0.005
    assert table.values["top3"] == pytest.approx(a.top3) and table.values["top3"] == pytest.approx(
        0.9039, abs=1e-4
    )
    assert table.verdicts[0].text == (
        f"learned table: a helix, {a.helix.turns[0]:.2f} turns of period {a.helix.periods[0]:.0f} positions in its "
        f"top 3 components ({a.top3:.2f} of the variance), beating random walks of its own steps, smooth random "
        f"curves and its own spectrum (p = {a.helix.p_value:.3g}, the smallest its surrogates can give)"
    )
    assert table.verdicts[0].status == "beats its null" and table.verdicts[1].status == "not significant"
    assert table.verdicts[2].text.startswith("recurrence (one-parameter group): not significant: ")
    assert table.verdicts[2].status == "not significant" and "p = " in table.verdicts[2].text
    assert table.verdicts[3].text.startswith("reading: the helix is a statement about the curve's shape")
    assert a.recurrence.reason in table.verdicts[2].text


def test_gpt2_card_reads_its_heads_and_says_what_it_cannot_run(gpt2_card, real_data_dir):
    view = pg.position_qk_atlas(real_data_dir / "gpt2_small_attention", device="cpu")
    qk = gpt2_card.section("attention").values["qk_view"]
    assert qk["toeplitz_share_mean"] == pytest.approx(float(view.toeplitz_share.mean()), abs=1e-12)
    assert (
        gpt2_card.section("attention")
        .verdicts[0]
        .text.startswith(
            f"how heads read the table: the position term is {float(view.toeplitz_share.mean()):.2f} a function"
        )
    )
    assert gpt2_card.section("rotary").status == "does not apply"
    # the real folder holds wpe, ln_1 and c_attn only: the model cannot run, and the card says so
    assert gpt2_card.section("residual").status == "not available"
    assert gpt2_card.section("causal").status == "skipped"  # fast


@pytest.fixture(scope="module")
def smollm2_card(smollm2_gguf):
    return pg.card(smollm2_gguf, fast=True, n_sequences=2, seq_len=64, device="cpu", progress=False)


def test_smollm2_card_reads_its_gguf_through_one_architecture(smollm2_card, smollm2_gguf):
    c = smollm2_card
    assert c.kind == "rotary"
    assert [s.status for s in c.sections] == ["ran", "does not apply", "ran", "ran", "ran", "skipped"]
    identity = dict(c.section("identity").rows)
    assert identity["model type"] == "llama" and identity["layers"] == "30"
    assert "Q4_1" in identity["stored as"] and "base 100000" in identity["layer type all"]
    atlas = pg.rotary_atlas(smollm2_gguf, fold_norm=True, device="cpu")
    rotary = c.section("rotary").values["all"]
    assert rotary["short_share_mean"] == pytest.approx(float(atlas.short_share.mean()), abs=1e-12)
    assert rotary["critical_planes"] == int(atlas.critical.sum()) == 20
    assert "Alice's Adventures in Wonderland" in c.corpus and "2 x 64" in c.corpus


def test_smollm2_card_s_residual_and_attention_lines_are_hidden_positions_own(smollm2_card, smollm2_gguf):
    from pos_geometry.cards.corpus import default_corpus

    hidden = pg.hidden_positions(
        smollm2_gguf,
        default_corpus(),
        attention=True,
        n_sequences=2,
        seq_len=64,
        device="cpu",
        progress=False,
    )
    reading = residual_reading(hidden.metrics_rows(), hidden.skip_first)
    assert smollm2_card.section("residual").verdicts[0].text == f"residual stream: {reading['sentence']}"
    mass, uniform = local_mass(hidden.attention)
    by_offset = smollm2_card.section("attention").values["by_offset"]
    assert by_offset["local_heads"] == int((mass >= 0.5).sum())
    assert by_offset["uniform_local_mass"] == pytest.approx(uniform)


@pytest.mark.parametrize("which", ["gpt2_card", "smollm2_card"])
def test_every_sentence_of_a_real_card_agrees_with_the_card(which, request):
    """Each verdict says what it decided; "most local" is said once, by the attention section; the rotary line
    names what it measures (a share of QK weight); every detail row has a value; the table is named stored or
    computed; the residual layers' numbering is stated; the page lists nothing twice."""
    from pos_geometry.cards.render import render_html
    from pos_geometry.cards.result import VERDICT_STATUSES

    c = request.getfixturevalue(which)
    texts = [v.text for v in c.verdicts]
    assert all(v.status in VERDICT_STATUSES for v in c.verdicts)
    assert sum("most local" in t for t in texts) <= 1
    assert all(v.text.startswith("attention by offset") for v in c.verdicts if "most local" in v.text)
    assert len(texts) == len(set(texts))
    for s in c.sections:
        assert all(k.strip() and v.strip() for k, v in s.rows), s.key
    table_row = dict(c.section("identity").rows).get("table", "")
    if c.kind == "rotary":
        assert "computed from the config" in table_row and "stored" not in table_row
        assert any(
            "lean most on the fast planes" in t and "a share of the query/key form" in t for t in texts
        )
    else:
        assert "stored as float32" in table_row
    if c.section("residual").status == "ran":
        assert dict(c.section("residual").rows)["layer numbering"].startswith(
            "layer 0 is the embedding output"
        )
    page = render_html(c)
    assert "not run:" not in page and "Multiple comparisons:" in page
