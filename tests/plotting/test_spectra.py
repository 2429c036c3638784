"""plot_spectrum: the spectra of a periodicity result, significant periods marked with period and p-value."""

from __future__ import annotations

import numpy as np
import pytest

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.plotting.spectra import peak_label, plot_spectrum


def test_spectra_and_significant_peaks(periodic_result) -> None:
    res = periodic_result
    fig = plot_spectrum(res)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert [t.name for t in lines] == ["mean similarity by offset", "PC1", "PC2", "PC3"]
    np.testing.assert_allclose(lines[0].x, res.offset_periods.numpy())
    np.testing.assert_allclose(lines[0].y, res.offset_spectrum.numpy())
    np.testing.assert_allclose(lines[2].y, res.pc_spectrum[1].numpy())
    assert fig.layout.xaxis.type == "log"
    significant = [p for p in res.peaks if p.significant]
    assert significant, "the synthetic period-32 table must have significant peaks"
    assert all(abs(p.period - 32) < 0.5 for p in significant)
    (marks,) = [t for t in fig.data if t.mode == "markers"]
    np.testing.assert_allclose(marks.x, [p.period for p in significant])
    np.testing.assert_allclose(marks.y, [p.power_fraction for p in significant])
    texts = [a.text for a in fig.layout.annotations]
    assert texts == [f"{p.series}: P={p.period:.1f} p={p.p_value:.3g}" for p in significant]
    assert all("P=32.0" in t for t in texts)
    # annotations on a log axis are placed at log10(period)
    np.testing.assert_allclose(
        [a.x for a in fig.layout.annotations], np.log10([p.period for p in significant])
    )
    assert fig.layout.title.text == "Spectra · toy-periodic @ v1 · rows 0–159 · α=0.05"


def test_series_selection_and_insignificant_peaks(periodic_result) -> None:
    fig = plot_spectrum(periodic_result, series="PC3", show_insignificant=True)
    assert [t.name for t in fig.data if t.mode == "lines"] == ["PC3"]
    pc3 = [p for p in periodic_result.peaks if p.series == "PC3"]
    assert pc3 and not any(p.significant for p in pc3)  # PC3 is noise
    (hollow,) = [t for t in fig.data if t.mode == "markers"]
    assert hollow.name == "not significant" and len(hollow.x) == len(pc3)
    assert fig.layout.annotations == ()


def test_peak_label_and_errors(periodic_result) -> None:
    assert peak_label(periodic_result.peaks[0]).startswith("P=32.0 p=")
    with pytest.raises(InvalidArgumentError, match="series must be among"):
        plot_spectrum(periodic_result, series="PC9")


def test_gpt2_period_is_marked(gpt2_wpe) -> None:
    # PC1 and PC2 of GPT-2's whole table turn with a period of 530–572 positions, above the red-noise
    # background fitted to each series: with 19 surrogates both reach the smallest p (0.05).
    fig = plot_spectrum(gpt2_wpe, series=["PC1", "PC2"], n_surrogates=19, alpha=0.05)
    texts = [a.text for a in fig.layout.annotations]
    assert texts and all(t.startswith(("PC1: P=", "PC2: P=")) and "p=0.05" in t for t in texts)
