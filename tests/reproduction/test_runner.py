"""reproduce_blog_post end to end: real GPT-2 table, a given path, missing models, and the report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA

from pos_geometry import ExportError, InvalidArgumentError, UnknownModelError
from pos_geometry.reproduction import parse_model_paths, reproduce_blog_post
from pos_geometry.reproduction.runner import NINE_GPT2S


def _helix_table(n=1024, d=64, period=300.0, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    z = np.stack([np.cos(2 * np.pi * t / period), np.sin(2 * np.pi * t / period), t / n], axis=1)
    q, _ = np.linalg.qr(rng.normal(size=(d, 3)))
    return (z @ q.T + 0.01 * rng.normal(size=(n, d))).astype(np.float32)


@pytest.fixture(scope="module")
def run(real_data_dir, tmp_path_factory, record_decompositions):
    out = tmp_path_factory.mktemp("repro")
    medium = out.parent / "medium.npy"
    np.save(medium, _helix_table())
    steps = []
    mp = pytest.MonkeyPatch()
    mp.setenv("POS_GEOMETRY_CACHE", str(out.parent / "pg-cache"))
    mp.setenv("HF_HUB_CACHE", str(out.parent / "hf-cache"))
    calls = record_decompositions(mp)
    try:
        result = reproduce_blog_post(
            out / "report",
            data_dir=real_data_dir,
            paths={"gpt2-medium": medium},
            formats=("html",),
            on_stage=lambda label, done, total: steps.append((label, done, total)),
        )
    finally:
        mp.undo()
    return result, steps, calls


@pytest.mark.slow
def test_claims_and_numbers(run, gpt2_wpe):
    result, steps, _ = run
    claims = {c.key: c for c in result.claims}
    assert list(claims) == [
        "variance_3d", "truncation", "outliers", "helix", "family", "similarity", "columns", "tokens", "rotary",
        "look_back",
    ]  # fmt: skip
    oracle = PCA(3).fit(gpt2_wpe.astype(np.float64)).explained_variance_ratio_.sum()
    assert claims["variance_3d"].values["top3"] == pytest.approx(oracle, abs=1e-6)
    for key in ("truncation", "outliers", "helix"):
        assert claims[key].verdict == "reproduced", claims[key]
    # claim 1 is judged by its jackknife interval, which straddles both edges of the band: undecidable
    assert claims["variance_3d"].verdict == "undecidable from this table", claims["variance_3d"]
    assert claims["truncation"].values["runs_null"]["p_value"] < 0.05
    assert (
        claims["variance_3d"].values["top3_interval"]["low"]
        < 0.85
        < 0.95
        < claims["variance_3d"].values["top3_interval"]["high"]
    )
    assert claims["truncation"].values["parts"]["first_100_close_to_3d"] == "holds"
    assert {"null[step_walk]", "null[smooth_gp]"} <= set(claims["variance_3d"].values)
    cols = claims["columns"]
    assert cols.verdict == "not reproduced" and "random walks of its steps" in cols.measured, cols.measured
    assert claims["helix"].values["harmonics"][2]["pinned"]
    # Against red noise the offset curve's one broad oscillation is not a significant period (p ≈ 0.2),
    # while PC1 and PC2 do turn periodically: the claim says both, with the null beside them.
    sim = claims["similarity"]
    assert (
        sim.verdict == "undecidable from this table" and "red noise" in sim.measured and "PC1" in sim.measured
    )
    assert sim.values["cycles_in_window"] < 2 and set(sim.values["pc_periods"]) == {"PC1", "PC2", "PC3"}
    assert claims["helix"].values["nulls"].keys() == {"step_walk", "smooth_gp", "stationary"}
    assert claims["tokens"].verdict == "not measured"  # no wte here: not estimated
    assert claims["rotary"].verdict == "does not apply"
    # the look-back claim, on GPT-2's real attention weights against the permuted-key null: the rotation
    # picture holds for long look-backs (39 of 45 rotating heads) and fails for the short ones (0 of 5)
    look = claims["look_back"]
    assert look.verdict == "not reproduced", look.measured
    assert look.values["parts"] == {"a": "holds", "b": "holds", "c": "undecidable", "d": "fails"}
    assert (
        look.values["heads_above_null"] >= 0.75 * 144
        and look.values["rotating_heads"] > 3 * look.values["rotating_heads_null"]
    )
    assert look.values["rotation_gives_peak"] > look.values["rotating_peaked"] / 2
    assert "L5H1" in look.values["short_heads"] and look.values["short_heads_agreeing"] == []
    assert len(look.values["heads"]) == 144 and "direct path" in look.measured
    family = claims["family"]
    assert family.verdict == "undecidable from this table" and "2 of 9 available" in family.measured
    assert sorted(family.values["missing"]) == sorted(set(NINE_GPT2S) - {"gpt2", "gpt2-medium"})
    assert steps[-1][0] == "done" and steps[-1][1] == steps[-1][2]
    assert len({total for _, _, total in steps}) == 1  # one total for the whole run
    numbers = [done for label, done, _ in steps if not label.startswith("writing the figures (")]
    assert numbers == sorted(set(numbers))  # each stage its own number, in order, never repeated


@pytest.mark.slow
def test_report_files(run):
    result, _, _ = run
    md = result.report.read_text()
    assert "| 1 | About 90% of the variance" in md and "0.904" in md and "**reproduced**" in md
    # how the post was read is in both reports, and the claims are labelled as paraphrases
    from pos_geometry.reference import reference

    how = reference("helix_post")["how_it_was_read"]
    assert how in md and "the post's claim (paraphrased)" in md and md.count(how) == 1
    for missing in result.missing:
        assert f"`pos-geometry fetch {missing.name}`" in md
    assert "medium.npy (given with --model)" in md
    assert "no learned positional matrix" in md and "kind='rotary'" in md
    # the rotary models' atlas section: their q/k weights are not here, so each is named with its fetch command
    assert "## How the rotary models use position: the frequency atlas" in md
    assert "`pos-geometry atlas pythia-160m --out atlas --online`" in md
    assert "## Does a head look back N tokens?" in md and "| L5H1 |" in md
    data = json.loads((result.out / "report.json").read_text())
    assert [c["key"] for c in data["claims"]] == [c.key for c in result.claims]
    assert (
        data["post_reading"]["how_it_was_read"] == how
        and "paraphrase" in data["post_reading"]["claim_wording"]
    )
    found = {d["model"]: d["found"] for d in data["data"]}
    assert found["gpt2"] and found["gpt2-medium"] and not found["gpt2-xl"]
    assert found["pythia-160m"] and found["mistral-7b-v0.1"] and found["openai-gpt"]
    stems = {f.stem for f in result.figures}
    assert {
        "gpt2_helix",
        "gpt2_helix_rows100-1023",
        "gpt2_family_grid",
        "rotary_tables",
        "gpt2_lookback",
    } <= stems
    for f in result.figures:
        assert [p.suffix for p in f.files] == [".html"]
        text = f.files[0].read_text()
        # offline and small: one shared plotly.min.js beside the figures, nothing fetched from elsewhere
        assert re.findall(r'<script[^>]+src="([^"]+)"', text) == ["plotly.min.js"]
        assert len(text) < 2_000_000
        assert (f.files[0].parent / "plotly.min.js").stat().st_size > 1_000_000
        assert f"figures/{f.stem}.html" in md
        # titles, subplot titles and legends name models, never the file they were read from
        texts = re.findall(r'"(?:text|name)":"((?:[^"\\]|\\.)*)"', text)
        assert texts and not [t for t in texts if ".npy" in t or str(result.out.parent) in t], f.stem
    pages = {f.stem: f.files[0].read_text() for f in result.figures}
    # a fitted curve only where the verdict supports one: GPT-2's helix, never the rotary tables
    assert '"name":"fitted helix (helix' in pages["gpt2_helix"]
    assert "fitted helix" not in pages["rotary_tables"] and "(rotary table)" in pages["rotary_tables"]
    assert "slowest planes" in pages["rotary_tables"]  # drawn as planes that turn slowly, not a point cloud
    assert not list(result.out.rglob(".*tmp"))  # nothing half-written
    summary = result.summary_text()
    assert "variance_3d" in summary and "fetch gpt2-xl" in summary


def test_without_real_tables_nothing_is_faked(tmp_path, monkeypatch):
    import pos_geometry.reproduction.runner as runner

    monkeypatch.setattr(runner, "find_data_dir", lambda explicit=None: None)
    (tmp_path / "empty").mkdir()  # load() finds no real tables either: the data folder named is empty
    monkeypatch.setenv("POS_GEOMETRY_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("POS_GEOMETRY_TABLES", str(tmp_path / "empty"))

    def no_browser(browser=None):
        raise ExportError("no Chrome/Chromium found; install it with apt-get install chromium")

    monkeypatch.setattr(runner, "find_browser", no_browser)
    result = reproduce_blog_post(tmp_path / "out", formats=("html", "png"))
    claims = {c.key: c for c in result.claims}
    for key in (
        "variance_3d",
        "truncation",
        "outliers",
        "helix",
        "family",
        "similarity",
        "columns",
        "tokens",
        "look_back",
    ):
        assert claims[key].verdict == "not measured"
    assert claims["rotary"].verdict == "does not apply"
    assert {loc.name for loc in result.missing} == set(NINE_GPT2S) | {"openai-gpt"}
    assert all(f.skipped.startswith("png skipped") for f in result.figures)
    assert not list((tmp_path / "out").rglob("*.png"))
    assert "gpt2_helix" not in {f.stem for f in result.figures}
    assert "No folder of real tables was found" in result.report.read_text()


def test_parse_model_paths(tmp_path: Path):
    ckpt = tmp_path / "x.npy"
    np.save(ckpt, np.zeros((4, 2), np.float32))
    assert parse_model_paths([f"GPT2-Medium={ckpt}"]) == {"gpt2-medium": ckpt}
    with pytest.raises(InvalidArgumentError, match="NAME=PATH"):
        parse_model_paths(["gpt2-medium"])
    with pytest.raises(UnknownModelError, match="gpt2"):
        parse_model_paths([f"gtp2={ckpt}"])
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        parse_model_paths([f"gpt2={tmp_path / 'nope.npy'}"])


@pytest.mark.slow
def test_each_table_is_decomposed_once_per_window(run):
    """One reproduction decomposes each table once per window: GPT-2 small over its four windows and once
    more as TransformerLens centres it, the given gpt2-medium, GPT-1, the two rotary tables and the
    sinusoidal reference, and the rotary figure's slow planes of each rotary table. Nothing else downstream
    (claims, figures) refits."""
    _, _, calls = run
    assert len(calls) == len(set(calls)), sorted(calls)
    windows = sorted(w for _, w, _ in calls)
    # GPT-2 raw over 4 windows + rows 1..511 (Song & Zhong's stable rank) + centred over d_model, medium,
    # sinusoidal (all 1024 rows), GPT-1 (512), 2 rotary
    assert windows.count((1, 100)) == 1 and windows.count((1, 1024)) == 1 and windows.count((100, 1024)) == 1
    # + the rotary figure's PCA of each rotary table's slow planes (a column subset: another matrix)
    slow = [c for c in calls if c[0][2] in (8, 64)]
    assert len(slow) == 2, sorted(calls)
    assert len(calls) == 6 + 1 + 1 + 2 + 1 + 2, sorted(calls)
