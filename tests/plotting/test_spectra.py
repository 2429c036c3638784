"""plot_spectrum: the spectra of a periodicity result, significant periods marked with period and p-value."""

from __future__ import annotations

import numpy as np
import pytest

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.spectra import peak_label, plot_spectrum, series_label


def _peak_marks(fig):
    return [t for t in fig.data if t.mode == "markers" and t.legendgroup == "peaks"]


def test_spectra_and_significant_peaks(periodic_result) -> None:
    res = periodic_result
    fig = plot_spectrum(res)
    lines = [t for t in fig.data if t.mode == "lines" and t.legendgroup != "nulls"]
    assert [t.name for t in lines] == ["mean similarity by offset", "PC1", "PC2", "PC3"]
    np.testing.assert_allclose(lines[0].x, res.offset_periods.numpy())
    # the axis is the tested statistic: each series' power over its fitted background
    np.testing.assert_allclose(lines[0].y, res.offset_ratio.numpy())
    np.testing.assert_allclose(lines[2].y, res.pc_ratio[1].numpy())
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "background" in fig.layout.yaxis.title.text
    assert len({t.line.dash for t in lines}) == len(lines)  # overlapping curves stay apart
    significant = [p for p in res.peaks if p.significant]
    assert significant, "the synthetic period-32 table must have significant peaks"
    assert all(abs(p.period - 32) < 0.5 for p in significant)
    marks = _peak_marks(fig)
    assert sorted(t.x[0] for t in marks) == sorted(p.period for p in significant)
    by_name = {t.name: t for t in lines}
    named = {f"{series_label(p.series)} peak: {peak_label(p)}": p for p in significant}
    for t in marks:
        p = named[t.name]
        # each marker sits at the tested ratio (its p-value's statistic, on its grid point), or on the top of
        # its own curve's peak around the refined period where that is higher: never below the curve
        curve = by_name[t.name.partition(" peak: ")[0]]
        order = np.argsort(curve.x)
        grid, values = np.asarray(curve.x)[order], np.asarray(curve.y)[order]
        right = int(np.searchsorted(grid, t.x[0]))
        assert grid[right - 1] <= t.x[0] <= grid[right]
        assert t.y[0] == pytest.approx(max(values[right - 2 : right + 2].max(), p.ratio), rel=1e-9)
        assert t.y[0] >= max(values[right - 1], values[right])
    for p in significant:  # the tested ratio is a point of its own curve (the grid point of the peak)
        curve = by_name[series_label(p.series)]
        assert np.isclose(np.asarray(curve.y), p.ratio, rtol=1e-6).any()
    # one level per null family, the ratio a peak must clear for p <= alpha; every marked peak clears them all
    levels = {t.name: t.y[0] for t in fig.data if t.legendgroup == "nulls"}
    thresholds = res.significance_thresholds()
    assert len(levels) == len(thresholds) == 3
    assert sorted(levels.values()) == pytest.approx(sorted(thresholds.values()))
    assert all(t.y[0] > max(thresholds.values()) for t in marks)
    # each peak is labelled once, in the legend, in words, in its series' colour: no arrows to cross
    assert fig.layout.annotations == ()
    colour = {t.name: t.line.color for t in lines}
    for t in marks:
        series, _, rest = t.name.partition(" peak: ")
        assert series in colour and t.marker.color == colour[series]
        assert rest.startswith("period 32.0") and ", p = " in rest
    assert len({t.marker.symbol for t in marks}) == len(marks)
    assert fig.layout.title.text == "Spectra · toy-periodic @ v1 · rows 0–159 · α=0.05"


def test_significance_thresholds_agree_with_the_p_values(periodic_result) -> None:
    """A ratio above every threshold has p <= alpha, one just below some threshold has p > alpha."""
    res = periodic_result
    levels = res.significance_thresholds()
    for null, values in res.null_values.items():
        above = levels[null] * (1 + 1e-9)
        below = levels[null] * (1 - 1e-9)
        p_above = (1 + int((values >= above).sum())) / (res.n_surrogates + 1)
        p_below = (1 + int((values >= below).sum())) / (res.n_surrogates + 1)
        assert p_above <= res.alpha < p_below


def test_no_internal_key_anywhere(periodic_result) -> None:
    fig = plot_spectrum(periodic_result, show_insignificant=True)
    assert "mean_similarity" not in fig.to_json()


def test_period_axis_fits_the_data(periodic_result) -> None:
    res = periodic_result
    fig = plot_spectrum(res)
    lo, hi = (10**v for v in fig.layout.xaxis.range)
    lo, hi = lo * (1 - 1e-9), hi * (1 + 1e-9)  # the log10 round trip
    # never beyond the window, and every period holding ≥ 0.5% of the tallest curve's power is shown
    assert hi <= res.n_positions * (1 + 1e-8)
    curves = [(res.offset_periods.numpy(), res.offset_ratio.numpy())]
    curves += [(res.pc_periods.numpy(), row) for row in res.pc_ratio.numpy()]
    top = max(power.max() for _, power in curves)
    carrying = np.concatenate(
        [periods[(power >= 0.005 * top) & (periods <= res.n_positions)] for periods, power in curves]
    )
    assert lo <= carrying.min() and carrying.max() <= hi
    assert lo >= carrying.min() / 1.3  # no empty decade below the data
    assert all(lo <= v <= hi for v in fig.layout.xaxis.tickvals)


def test_series_selection_and_insignificant_peaks(periodic_result) -> None:
    fig = plot_spectrum(periodic_result, series="PC3", show_insignificant=True)
    assert [t.name for t in fig.data if t.mode == "lines" and t.legendgroup != "nulls"] == ["PC3"]
    pc3 = [p for p in periodic_result.peaks if p.series == "PC3"]
    assert pc3 and not any(p.significant for p in pc3)  # PC3 is noise
    (hollow,) = [t for t in fig.data if t.mode == "markers"]  # PC3 has no significant peak
    assert hollow.name == "not significant" and len(hollow.x) == len(pc3)
    (note,) = fig.layout.annotations  # every curve below every null's level: the figure says what that means
    assert note.text.startswith(f"no peak reaches a null's p = {periodic_result.alpha:g} level")
    assert plot_spectrum(periodic_result).layout.annotations == ()  # the periodic series reach it


def test_peak_label_and_errors(periodic_result) -> None:
    assert peak_label(periodic_result.peaks[0]).startswith("period 32.0")
    with pytest.raises(InvalidArgumentError, match="series must be among"):
        plot_spectrum(periodic_result, series="PC9")


def test_gpt2_peaks_are_shown_but_not_marked_as_periods(gpt2_wpe, gpt1_positions) -> None:
    # PC1 and PC2 of GPT-2's whole table oscillate with periods of 530–572 positions, but random walks of
    # the table's own steps and smooth GP curves give PCA cosines as clean: no mark says "period". GPT-1's
    # period-6 ripple of the offset curve beats every null and is marked.
    fig = plot_spectrum(gpt2_wpe, series=["PC1", "PC2"], n_surrogates=19, alpha=0.05)
    assert [t.name for t in _peak_marks(fig)] == []
    gpt1 = plot_spectrum(gpt1_positions, series=["mean_similarity"], n_surrogates=19, alpha=0.05)
    names = [t.name for t in _peak_marks(gpt1)]
    assert names and all(
        n.startswith("mean similarity by offset peak: period 6") and "p = 0.05" in n for n in names
    )
    # the axis stays inside the band: periods from 2 to the window's length
    lo, hi = (10**v for v in fig.layout.xaxis.range)
    assert 2 / 1.25 <= lo < 400 and hi <= 1024 * (1 + 1e-9)
