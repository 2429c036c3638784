"""``card`` on every kind of model the toolkit reads: which sections run, which do not apply (with the reason),
and that every verdict line states what the analysis itself returns, computed here again independently."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA

import pos_geometry as pg
from pos_geometry.atlas.plane_preference import plane_preference
from pos_geometry.cards import SECTION_KEYS, SECTION_STATUSES

DATA = Path(__file__).resolve().parents[1] / "data" / "gguf_parity"

EXPECTED = {  # kind -> status of each section, in SECTION_KEYS order
    "learned": ("ran", "ran", "does not apply", "ran", "ran", "ran"),
    "rotary": ("ran", "does not apply", "ran", "ran", "ran", "ran"),
    "per_type": ("ran", "does not apply", "ran", "ran", "ran", "ran"),
    "no_table": ("ran", "does not apply", "does not apply", "not available", "ran", "does not apply"),
    "table_file": ("ran", "ran", "does not apply", "does not apply", "does not apply", "does not apply"),
}
KINDS = {
    "learned": "learned table", "rotary": "rotary", "per_type": "rotary, per layer type",
    "no_table": "no positional table", "table_file": "table file",
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_kind_runs_what_applies_and_says_why_for_the_rest(kind_cards, kind):
    c = kind_cards[kind]
    assert c.kind == KINDS[kind]
    assert tuple(s.key for s in c.sections) == SECTION_KEYS
    assert tuple(s.status for s in c.sections) == EXPECTED[kind]
    for s in c.sections:
        assert s.status in SECTION_STATUSES and s.seconds >= 0
        assert s.verdicts, f"{kind}/{s.key} has no verdict line"
        if s.status == "ran":
            assert not s.reason and all(v.text for v in s.verdicts)
        else:  # the reason is on the page, and its first sentence is in the verdict line
            assert len(s.reason) > 20 and s.verdicts[0].status == s.status
            assert s.reason.split(". ")[0][:60] in s.verdicts[0].text
    json.loads(c.to_json(allow_nan=False))  # strict JSON, every number with its provenance


def test_the_table_verdicts_are_analyze_s_own(kind_cards, kind_models):
    c, (path, _) = kind_cards["table_file"], kind_models["table_file"]
    pe = pg.load(path)
    a = pg.analyze(pe, progress=False)
    values = c.section("table").values
    oracle = PCA(n_components=3).fit(pe.matrix.double().numpy()).explained_variance_ratio_.sum()
    assert values["top3"] == pytest.approx(oracle, abs=1e-6)  # the analysis runs in the table's float32
    assert values["helix"]["verdict"] == a.helix.verdict == "helix"
    assert values["helix"]["p_value"] == a.helix.p_value
    line = c.section("table").verdicts[0].text
    assert line.startswith("learned table: a helix") and f"period {a.helix.periods[0]:.0f}" in line
    assert "random walks of its own steps" in line and "smooth random curves" in line
    assert c.section("table").verdicts[0].p_value == a.helix.p_value
    assert abs(a.helix.periods[0] - 120) < 3  # the constructed helix's period


def test_the_rotary_verdict_is_the_atlas_s_share_beside_uniform_use(kind_cards, kind_models):
    c, (path, _) = kind_cards["rotary"], kind_models["rotary"]
    atlas = pg.rotary_atlas(path, fold_norm=True, device="cpu")
    values = c.section("rotary").values["all"]
    assert values["short_share_mean"] == pytest.approx(float(atlas.short_share.mean()), abs=1e-12)
    # uniform use of the planes, from the config alone: planes with 2π/θ_i ≤ the context (base 500, head_dim 8)
    theta = 500.0 ** (-np.arange(0, 8, 2) / 8)
    assert values["uniform_share"] == pytest.approx(np.mean(2 * np.pi / theta <= 128), abs=1e-12)
    assert f"{values['short_share_mean']:.2f} of the QK form" in c.section("rotary").verdicts[0].text
    # which heads lean on the fast planes is the permutation test's, not the count above the uniform share
    lean = plane_preference(atlas)
    assert values["heads_leaning"] == lean.n_leaning and values["heads_tested"] == lean.n_tested
    np.testing.assert_array_equal(np.asarray(values["lean_p_values"]), lean.p_value.numpy())
    verdict = c.section("rotary").verdicts[0]
    assert (
        f"{lean.n_leaning} of {lean.n_tested} heads lean on them beyond what planes used alike"
        in verdict.text
    )
    assert "Holm's correction over the" in verdict.text and verdict.status == "not significant"
    assert (
        "no head can be called leaning: its smallest possible p, 0.17, is above Holm's first step, 0.05/8"
        in (verdict.text)
    )  # 4 planes, 2 fast: 6 subsets
    assert verdict.min_p_value == 1.0  # the family's smallest p: min(1, 8 heads × 1/6)
    assert verdict.p_value == pytest.approx(min(1.0, float(lean.p_value.min()) * lean.n_tested))


def test_a_model_whose_types_rotate_differently_gets_one_atlas_per_type(kind_cards):
    values = kind_cards["per_type"].section("rotary").values
    assert set(values) == {"sliding_attention", "full_attention"}
    sliding = pg.rotary_atlas(
        kind_cards["per_type"].model, layer_type="sliding_attention", fold_norm=True, device="cpu"
    )
    assert values["sliding_attention"]["short_share_mean"] == pytest.approx(float(sliding.short_share.mean()))
    texts = " ".join(v.text for v in kind_cards["per_type"].section("rotary").verdicts)
    assert "(sliding_attention layers)" in texts and "(full_attention layers)" in texts


def test_the_causal_lines_are_intervene_s_deltas(kind_cards, kind_models):
    from pos_geometry.interventions import RemovePlanes

    c, (path, tokens) = kind_cards["rotary"], kind_models["rotary"]
    edits = c.section("causal").values["edits"]
    assert edits[0]["edit"] == "the 1 fastest rotation planes removed"  # 4 planes: a quarter is 1
    own = pg.intervene(path, tokens, RemovePlanes(fastest=1), attention=False, device="cpu", progress=False)
    assert edits[0]["delta"] == pytest.approx(own.delta, abs=1e-6)
    assert tuple(edits[0]["interval"]) == pytest.approx(own.delta_interval, abs=1e-6)
    swap = c.section("causal").verdicts[2]
    assert "rotation pairing swapped" in swap.text and swap.interval == pytest.approx(
        tuple(edits[2]["interval"])
    )


def test_the_helix_edit_is_listed_as_not_applying_to_a_table_that_is_not_a_helix(kind_cards):
    c = kind_cards["learned"]  # a random GPT-2 table: no helix
    assert c.section("table").values["helix"]["verdict"] != "helix"
    texts = [v.text for v in c.section("causal").verdicts]
    assert [e["edit"] for e in c.section("causal").values["edits"]] == [
        "rank 3 PCA reconstruction of the table",
        "table replaced by its mean row",
    ]
    assert texts[-1].startswith("causal: the table's fitted helix: does not apply: ")


def test_the_residual_verdict_reads_hidden_positions(kind_cards, kind_models):
    from pos_geometry.hidden.reading import residual_reading

    c, (path, tokens) = kind_cards["learned"], kind_models["learned"]
    hidden = pg.hidden_positions(path, tokens, attention=False, seq_len=32, device="cpu", progress=False)
    reading = residual_reading(hidden.metrics_rows(), hidden.skip_first)
    assert c.section("residual").verdicts[0].text == f"residual stream: {reading['sentence']}"
    assert reading["above_its_floor"]  # a table 20x the default scale stands above its floor at the input


def test_a_bare_table_names_what_it_lacks(kind_cards):
    c = kind_cards["table_file"]
    assert "config.json" in c.section("identity").values["reason"]
    assert c.corpus is None  # nothing was run


def test_fast_skips_the_causal_edits_and_says_so(kind_models):
    path, tokens = kind_models["rotary"]
    c = pg.card(path, tokens, fast=True, device="cpu", progress=False)
    assert c.fast and c.section("causal").status == "skipped"
    assert "fast card" in c.section("causal").reason


def test_progress_is_reported_per_section(kind_models):
    path, _ = kind_models["table_file"]
    seen = []
    pg.card(path, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, len(SECTION_KEYS)) for i in range(1, len(SECTION_KEYS) + 1)]


def test_an_unknown_model_is_refused_with_the_closest_names():
    with pytest.raises(pg.UnknownModelError, match="gpt2"):
        pg.card("gtp2", progress=False)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_a_model_s_folder_and_its_gguf_give_the_same_card(arch, tmp_path):
    """The same weights read from their transformers folder and from the GGUF llama.cpp's converter wrote of them
    (tests/data/gguf_parity): the same kind, sections and verdicts, to float32 rounding."""
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, np.random.default_rng(0).integers(0, 256, size=(3, 32)))
    folder = pg.card(DATA / arch, tokens, fast=True, device="cpu", progress=False)
    gguf = pg.card(DATA / f"{arch}-f32.gguf", tokens, fast=True, device="cpu", progress=False)
    assert gguf.kind == folder.kind
    assert [s.status for s in gguf.sections] == [s.status for s in folder.sections]
    for key in ("table", "rotary"):
        a, b = folder.section(key).values, gguf.section(key).values
        assert json.dumps(sorted(a)) == json.dumps(sorted(b))
    if arch == "llama":
        a, b = folder.section("rotary").values["all"], gguf.section("rotary").values["all"]
        assert b["short_share_mean"] == pytest.approx(a["short_share_mean"], abs=1e-6)
        assert (b["heads_leaning"], b["heads_tested"]) == (a["heads_leaning"], a["heads_tested"])
    else:
        a, b = folder.section("table").values, gguf.section("table").values
        assert b["top3"] == pytest.approx(a["top3"], abs=1e-6)
        assert b["helix"]["verdict"] == a["helix"]["verdict"]
    share_a = [r["positional_share"] for r in folder.section("residual").values["metrics"]]
    share_b = [r["positional_share"] for r in gguf.section("residual").values["metrics"]]
    assert share_b == pytest.approx(share_a, abs=1e-4)


def test_each_helix_in_its_own_plane_gets_a_line():
    from types import SimpleNamespace

    from pos_geometry.cards.table_section import _planes

    t = np.arange(400)[:, None]
    table = np.hstack([np.cos(2 * np.pi * t / 100), np.sin(2 * np.pi * t / 100), t / 400])
    fit = pg.fit_helix(table + 0.01 * np.random.default_rng(0).normal(size=table.shape), n_surrogates=99)
    lines = _planes(SimpleNamespace(helices=(fit, fit)))
    assert len(lines) == 2 and lines[0].p_value == fit.p_value
    assert lines[0].text.startswith(
        f"learned table, in the plane of the rotation of period {fit.periods[0]:.4g}: a helix"
    )
    assert _planes(SimpleNamespace(helices=())) == []


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_every_verdict_line_says_what_it_decided(kind_cards, kind):
    """One vocabulary: a line with a test says whether it beat its null (and its p agrees with the decision
    at α), a line without one is descriptive, and a line of a section that did not run carries its status."""
    from pos_geometry.cards.result import ALPHA, VERDICT_STATUSES

    c = kind_cards[kind]
    for s in c.sections:
        for v in s.verdicts:
            assert v.status in VERDICT_STATUSES, (s.key, v.status)
            if v.status == "beats its null" and v.interval is not None and v.p_value is None:  # a bootstrap
                assert not v.interval[0] <= 0.0 <= v.interval[1] and v.null
            elif v.status == "beats its null":
                assert v.p_value is not None and v.p_value <= ALPHA and v.null
                assert v.min_p_value is not None and v.min_p_value <= v.p_value
            elif v.status == "not significant" and v.p_value is not None:
                assert (
                    v.p_value > ALPHA or s.key == "table"
                )  # the analysis decides (a helix: every null at α)
            elif v.status == "descriptive":
                assert v.p_value is None
    table = c.section("table")
    if table.status == "ran":  # the helix line is the analysis's own decision
        helix = table.values["helix"]
        assert table.verdicts[0].status == {"helix": "beats its null", "not a helix": "not significant"}.get(
            helix["verdict"], "does not apply"
        )


def test_the_policy_line_counts_the_card_s_tests_and_holm_s_survivors(kind_cards):
    from pos_geometry.cards.render import render_html, render_markdown
    from pos_geometry.cards.result import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx(
        [0.03, 0.06, 0.06]
    )  # by hand: 3·0.01; 2·0.03; max(0.06, 0.04)
    assert holm([0.5]) == [0.5] and holm([]) == []
    c = kind_cards["table_file"]
    tested = [v for v in c.verdicts if v.tested]
    assert tested and all(v.p_value is not None for v in tested)
    policy = c.multiple_comparisons()
    hold = sum(p <= 0.05 for p in holm([v.p_value for v in tested]))
    assert f"each of the {len(tested)} tests with a p-value decides on its own" in policy
    assert f", {hold} still do at a family-wise α = 0.05" in policy
    assert html.escape(policy) in render_html(c) and "Multiple comparisons:" in render_markdown(c)
    assert "no verdict of this card comes from a test" in kind_cards["no_table"].multiple_comparisons()


def test_an_encoder_s_card_measures_its_masked_token_loss_and_its_gguf_says_why_it_cannot(tmp_path):
    """BERT (tests/data/gguf_parity): its folder holds the masked-LM head, so the causal edits run with the
    masked-token loss (the rule in the provenance); its GGUF holds no head, and the card says so."""
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, np.random.default_rng(0).integers(5, 256, size=(4, 32)))
    folder = pg.card(DATA / "bert", tokens, device="cpu", progress=False)
    causal = folder.section("causal")
    assert causal.status == "ran" and causal.values["objective"] == "masked-token"
    assert any(
        "masked-token loss: 5 of 32 positions" in step for p in causal.provenance for step in p.processing
    )
    assert "base masked-token loss (nats/token)" in dict(causal.rows)
    gguf = pg.card(DATA / "bert-f32.gguf", tokens, device="cpu", progress=False)
    said = gguf.section("causal")
    assert said.status == "not available" and "the file holds no masked-token head" in said.reason
    a, b = (c.section("attention").values["by_offset"] for c in (folder, gguf))
    np.testing.assert_allclose(b["local_mass"], a["local_mass"], rtol=1e-5)  # read both ways, on both sources
    assert b["uniform_local_mass"] == a["uniform_local_mass"] == pytest.approx(7 / 32)
