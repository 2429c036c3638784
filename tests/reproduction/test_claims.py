"""Each claim's measurement against independent numbers, and verdicts that can go either way."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from pos_geometry import PositionalEmbedding, Provenance, TokenEmbedding, analyze, load, pca, periodicity
from pos_geometry.reproduction import claims as C


def _pe(matrix, name="toy") -> PositionalEmbedding:
    return PositionalEmbedding(np.asarray(matrix, dtype=np.float64), Provenance(name, "learned", "test"))


@pytest.fixture(scope="module")
def gpt2(real_data_dir) -> PositionalEmbedding:
    return load(real_data_dir / "gpt2_small_wpe.npy", model_id="gpt2")


@pytest.fixture(scope="module")
def gpt2_helix(gpt2):
    """GPT-2 small's analysis with its helix fit (fewer surrogates than the reproduction, same verdict)."""
    return analyze(gpt2, analyses=("helix",), n_surrogates=39, alpha=0.05)


def _top3(x: np.ndarray) -> float:
    return float(PCA(3).fit(x.astype(np.float64)).explained_variance_ratio_.sum())


def test_variance_and_truncation_on_the_real_table(gpt2, gpt2_wpe):
    v = C.claim_variance(analyze(gpt2, analyses=()), pca(gpt2.center("d_model"), 3, solver="exact"))
    assert v.verdict == "reproduced"
    assert v.values["top3"] == pytest.approx(_top3(gpt2_wpe), abs=1e-6)
    assert v.values["top3"] == pytest.approx(0.9039, abs=1e-3)
    row_centred = gpt2_wpe - gpt2_wpe.mean(axis=1, keepdims=True)
    assert v.values["top3_center_d_model"] == pytest.approx(_top3(row_centred), abs=1e-6)
    t = C.claim_truncation(C.fit_windows(gpt2, analyze(gpt2, analyses=())))
    assert t.verdict == "undecidable from this table"  # no null given for the gain: (a) cannot be decided
    for name, expected in [
        ("all rows", 0.9039),
        ("rows 1–1023", 0.9106),
        ("rows 100–1023", 0.9511),
        ("rows 1–99", 0.9640),
    ]:
        a, b = C.TRUNCATION_WINDOWS[name]
        assert t.values[f"top3[{name}]"] == pytest.approx(_top3(gpt2_wpe[a:b]), abs=1e-6)
        assert t.values[f"top3[{name}]"] == pytest.approx(expected, abs=1e-3)


def test_outliers_on_the_real_table_and_a_smooth_curve(gpt2, gpt2_wpe):
    o = C.claim_outliers(gpt2)
    steps = np.linalg.norm(np.diff(gpt2_wpe.astype(np.float64), axis=0), axis=1)
    assert o.values["step_first_over_median"] == pytest.approx(steps[0] / np.median(steps), rel=1e-9)
    assert o.values["max_interior_step_over_median"] == pytest.approx(
        steps[1:-1].max() / np.median(steps), rel=1e-9
    )
    assert o.verdict == "reproduced"
    t = np.arange(200.0)
    smooth = np.stack([np.cos(t / 20), np.sin(t / 20), t / 200], axis=1)
    assert C.claim_outliers(_pe(smooth)).verdict == "not reproduced"


def test_helix_verdict_separates_a_helix_from_a_line(gpt2_helix):
    assert C.claim_helix(gpt2_helix).verdict == "reproduced"
    t = np.arange(300.0)
    line = np.outer(t, np.ones(6)) + np.random.default_rng(0).normal(scale=0.5, size=(300, 6))
    claim = C.claim_helix(analyze(_pe(line), analyses=("helix",), n_surrogates=39, alpha=0.05))
    assert claim.verdict == "not reproduced" and claim.values["shape"] == "line"
    assert C.claim_helix(None).verdict == "not measured"


def test_family_counts_what_was_measured(gpt2_helix):
    """Each side of the family rule: all available and helices; helices with some missing (undecidable); a
    measured table that is not a helix; none available."""
    partial = C.claim_family({"gpt2": gpt2_helix, "gpt2-xl": None})
    assert partial.verdict == "undecidable from this table" and partial.values["missing"] == ["gpt2-xl"]
    assert "1 of 2 available" in partial.measured
    assert C.claim_family({"gpt2": gpt2_helix}).verdict == "reproduced"
    assert C.claim_family({"a": None}).verdict == "not measured"
    t = np.arange(300.0)
    line = np.outer(t, np.ones(6)) + np.random.default_rng(0).normal(scale=0.5, size=(300, 6))
    not_helix = analyze(_pe(line), analyses=("helix",), n_surrogates=39, alpha=0.05)
    assert C.claim_family({"gpt2": gpt2_helix, "line": not_helix}).verdict == "partly reproduced"
    assert C.claim_family({"line": not_helix, "gpt2-xl": None}).verdict == "not reproduced"


def test_similarity_and_columns_on_synthetic_tables():
    t = np.arange(256.0)[:, None]
    periods = np.array([32.0, 64.0, 128.0, 48.0])
    phases = np.linspace(0, np.pi, 4)
    waves = np.cos(2 * np.pi * t / periods + phases)  # every column a sinusoid
    pe = _pe(np.repeat(waves, 4, axis=1) + 0.01 * np.random.default_rng(0).normal(size=(256, 16)))
    res = periodicity(pe, n_surrogates=99)
    cols = C.claim_columns(res)
    assert cols.verdict == "reproduced" and cols.values["share_r2_0.5"] == 1.0
    # The offset curve of a table that turns with one period is that period's cosine: far above red noise.
    circle = _pe(
        np.concatenate([np.cos(2 * np.pi * t / 32), np.sin(2 * np.pi * t / 32)], axis=1).repeat(4, axis=1)
    )
    sim = C.claim_similarity(periodicity(circle, n_surrogates=99))
    assert sim.verdict == "reproduced" and sim.values["periods"][0] == pytest.approx(32.0, rel=0.01)
    noise = _pe(np.random.default_rng(1).normal(size=(256, 16)))
    res = periodicity(noise, n_surrogates=99)
    assert C.claim_columns(res).verdict == "not reproduced"
    assert C.claim_similarity(res).verdict == "not reproduced"


def test_tokens_verdict_follows_the_overlap(gpt2, gpt2_wpe):
    fitted = pca(gpt2, 10, solver="exact")
    rng = np.random.default_rng(0)
    basis = PCA(3).fit(gpt2_wpe.astype(np.float64)).components_
    away = rng.normal(size=(500, 768))
    away -= (away @ basis.T) @ basis  # no component in the positional subspace
    prov = Provenance("tokens", "learned", "test")
    claim = C.claim_tokens(fitted, TokenEmbedding(torch.from_numpy(away).float(), prov))
    assert claim.verdict == "reproduced" and claim.values["token_variance_fraction"] < 1e-6
    inside = gpt2_wpe[rng.integers(0, 1024, 500)] + 0.01 * rng.normal(size=(500, 768))
    claim = C.claim_tokens(fitted, TokenEmbedding(torch.from_numpy(inside).float(), prov))
    assert claim.verdict == "not reproduced"
    assert C.claim_tokens(fitted, None).verdict == "not measured"


def test_rotary_models_are_shown_as_rotary_tables():
    tables = [load("pythia-160m", n_positions=256), load("mistral-7b-v0.3", n_positions=256)]
    claim = C.claim_rotary([analyze(t, analyses=()) for t in tables])
    assert claim.verdict == "does not apply"
    assert all(v["kind"] == "rotary" for v in claim.values.values())
    assert "rope_theta=1000000.0" in claim.measured and "rotary_pct=0.25" in claim.measured
    assert "no learned positional matrix" in claim.measured and "rotary" not in claim.statement


@pytest.mark.slow
def test_jackknife_intervals_match_an_independent_leave_one_block_out(gpt2, gpt2_wpe):
    """Every leave-one-block-out value is scikit-learn's top-3 ratio of the remaining rows."""
    from pos_geometry.reproduction.uncertainty import top3_intervals, truncation_null

    iv = top3_intervals(gpt2, C.TRUNCATION_WINDOWS, differences=C.TRUNCATION_DIFFERENCES)
    x = gpt2_wpe.astype(np.float64)
    loo = [_top3(np.delete(x, np.arange(64 * b, 64 * b + 64), axis=0)) for b in range(16)]
    assert iv["all rows"].leave_one_out == pytest.approx((min(loo), max(loo)), abs=1e-4)
    g = 16
    se = np.sqrt((g - 1) / g * np.sum((np.array(loo) - np.mean(loo)) ** 2))
    assert iv["all rows"].high - iv["all rows"].estimate == pytest.approx(1.959964 * se, rel=1e-3)
    first = [_top3(np.delete(x[1:100], np.arange(lo, hi), axis=0))
             for lo, hi in zip(np.round(np.linspace(0, 99, 17)).astype(int)[:-1],
                               np.round(np.linspace(0, 99, 17)).astype(int)[1:], strict=True)]  # fmt: skip
    assert iv["rows 1–99"].leave_one_out == pytest.approx((min(first), max(first)), abs=1e-4)
    gain = iv[C.TRUNCATION_GAIN]
    assert gain.estimate == pytest.approx(_top3(x[100:]) - _top3(x), abs=1e-6) and gain.leave_one_out[0] > 0
    v = C.claim_variance(analyze(gpt2, analyses=()), None, iv)
    # GPT-2's interval [0.83, 0.98] crosses both edges of [0.85, 0.95]; the gain's [-0.03, 0.12] straddles 0
    assert v.verdict == "undecidable from this table" and "leaving out any one of 16 blocks" in v.measured
    windows = C.fit_windows(gpt2, analyze(gpt2, analyses=()))
    t = C.claim_truncation(windows, iv)  # no null for the gain: it cannot be told from dropping any 100 rows
    assert t.values["parts"] == {"truncated_view_cleaner": "undecidable", "first_100_close_to_3d": "holds"}
    assert t.verdict == "undecidable from this table"
    runs = truncation_null(gpt2)  # dropping rows 0-99 gains +0.047; no other run of 100 gains half as much
    assert runs.gain == pytest.approx(gain.estimate, abs=1e-9) and max(runs.others) < runs.gain / 2
    assert C.claim_truncation(windows, iv, runs).verdict == "reproduced"


def test_a_ratio_that_one_block_decides_is_undecidable():
    """A table whose 3-D share is in the band only because of one block of positions is not robustly ~90%."""
    from pos_geometry.reproduction.uncertainty import top3_intervals

    rng = np.random.default_rng(0)
    t = np.arange(512.0)[:, None]
    x = np.concatenate([np.cos(t / 40), np.sin(t / 40), t / 300], axis=1) @ rng.normal(size=(3, 32))
    x = x + rng.normal(scale=0.1, size=x.shape)
    x[:32] += rng.normal(scale=1.5, size=(32, 32))  # one block of outliers carries much of the variance
    pe = _pe(x)
    iv = top3_intervals(pe, {"all rows": (0, 512)})
    a = analyze(pe, analyses=())
    ratio = C.top3(a.pca)
    lo, hi = iv["all rows"].leave_one_out
    assert lo < hi and (hi - lo) > 0.05  # the outlying block moves the ratio
    claim = C.claim_variance(a, None, iv)
    assert iv["all rows"].low < C._BAND[0] <= ratio <= C._BAND[1] < iv["all rows"].high  # the block widens it
    assert claim.verdict == "undecidable from this table"


def test_sine_like_columns_must_beat_smooth_random_curves(gpt2):
    """GPT-2's columns look less like sine waves than those of random walks of its own steps or smooth GP
    curves of its length scale, so the claim is not reproduced; a table of true sinusoids beats both."""
    from pos_geometry.reproduction.uncertainty import column_sine_nulls

    res = periodicity(gpt2, n_surrogates=9, alpha=0.1)
    nulls = column_sine_nulls(gpt2, n_surrogates=9, n_columns=64)
    claim = C.claim_columns(res, nulls)
    share = claim.values["share_r2_0.5"]
    assert share == pytest.approx(float((res.column_r2 >= 0.5).double().mean()))
    for null in ("step_walk", "smooth_gp"):
        assert claim.values[f"null[{null}]"]["median_share"] > share
        assert claim.values[f"null[{null}]"]["median_r2"] > claim.values["median_r2"]
    assert claim.verdict == "not reproduced" and "random walks of its steps" in claim.measured
    t = np.arange(256.0)[:, None]
    waves = np.cos(2 * np.pi * t / np.array([16.0, 24.0, 40.0, 56.0]) + np.linspace(0, 3, 4))
    pe = _pe(np.repeat(waves, 8, axis=1) + 0.01 * np.random.default_rng(0).normal(size=(256, 32)))
    sine = C.claim_columns(periodicity(pe, n_surrogates=9, alpha=0.1), column_sine_nulls(pe, n_surrogates=19))
    assert sine.verdict == "reproduced", sine.measured


def test_the_helix_claim_flags_a_harmonic_held_by_the_search(gpt2_helix):
    claim = C.claim_helix(gpt2_helix)
    third = claim.values["harmonics"][2]
    assert third["pinned"] and third["turns"] == pytest.approx(4.8, abs=1e-9)  # a grid point, not the data's
    assert not claim.values["harmonics"][0]["pinned"] and "pinned on a search bound" in claim.measured
