"""Bias of every period estimator on pure sinusoids: P in {50, ..., 900} positions in 1024 rows, 4 phases.

The table is a circle traced with period P: columns ``cos(2πt/P + φ)``, ``sin(2πt/P + φ)``, t = 0..1023.
Estimators:

* ``spectral peak`` -- the old periodicity estimate: the largest bin of the Hann-tapered, linearly
  detrended, 8x zero-padded power spectrum of PC1, parabola-interpolated;
* ``periodicity PC1`` / ``periodicity offset curve`` -- pos_geometry.periodicity's least-squares periods
  of PC1 and of the mean similarity by offset (offsets 1..1023);
* ``fit_helix`` -- the leading harmonic of the helix model;
* ``column sinusoid`` -- periodicity's per-column sinusoid fit (column 0).

Run: ``.venv/bin/python benchmarks/bench_period_bias.py`` (about a minute on 2 cores). It prints the table
and writes it into ``benchmarks/RESULTS.md``. Target: |bias| < 1% wherever one cycle fits (P ≤ 1024).
"""

from __future__ import annotations

import math
import platform
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results_md import update_section

import pos_geometry as pg
from pos_geometry.analysis._spectra import tapered_power

PERIODS = (50, 100, 200, 256, 300, 400, 600, 900)
PHASES = (0.0, math.pi / 4, math.pi / 2, 2.0)
N = 1024
PAD = 8


def spectral_peak(series: np.ndarray) -> float:
    power, _ = tapered_power(torch.from_numpy(series), pad=PAD)
    p = power.numpy()
    i = int(np.argmax(p))
    shift = 0.0
    if 0 < i < p.size - 1:
        a, b, c = p[i - 1 : i + 2]
        denom = a - 2 * b + c
        shift = 0.5 * (a - c) / denom if denom < 0 else 0.0
    return PAD * series.size / (i + 1 + shift)


def estimates(period: float, phase: float) -> dict[str, float]:
    t = np.arange(N, dtype=np.float64)
    w = 2 * math.pi / period
    table = np.stack([np.cos(w * t + phase), np.sin(w * t + phase)], axis=1)
    res = pg.periodicity(table, n_surrogates=19, alpha=0.05)
    pc1 = next(p for p in res.peaks if p.series == "PC1")
    offset = next(p for p in res.peaks if p.series == "mean_similarity")
    coords = pg.pca(table, 2).coordinates[:, 0].double().numpy()
    fit = pg.fit_helix(table, n_components=2, n_surrogates=0)
    return {
        "spectral peak (old)": spectral_peak(coords),
        "periodicity PC1": pc1.period,
        "periodicity offset curve": offset.period,
        "fit_helix": float(fit.periods[0]),
        "column sinusoid": float(res.column_periods[0]),
    }


def main() -> None:
    rows = {}
    for period in PERIODS:
        errs: dict[str, list[float]] = {}
        for phase in PHASES:
            for name, value in estimates(period, phase).items():
                errs.setdefault(name, []).append(100 * (value - period) / period)
        rows[period] = errs
    names = list(next(iter(rows.values())))
    header = "| P (cycles in 1024) | " + " | ".join(names) + " |"
    lines = [header, "|" + "---|" * (len(names) + 1)]
    for period, errs in rows.items():
        cells = []
        for name in names:
            e = np.asarray(errs[name])
            worst = e[np.argmax(np.abs(e))]
            cells.append(f"{worst:+.3f}%")
        lines.append(f"| {period} ({N / period:.2f}) | " + " | ".join(cells) + " |")
    worst_new = max(
        abs(v)
        for errs in rows.values()
        for name, e in errs.items()
        if name != "spectral peak (old)"
        for v in e
    )
    table = "\n".join(lines)
    text = (
        "## Period bias on pure sinusoids\n\n"
        f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, Python "
        f"{platform.python_version()}, torch {torch.__version__}. Command: "
        "`.venv/bin/python benchmarks/bench_period_bias.py`.\n\n"
        "A circle traced with period P over 1024 rows, phases 0, π/4, π/2, 2; each cell is the worst signed "
        "relative error over the 4 phases. `periodicity offset curve` spans offsets 1..1023.\n\n"
        f"{table}\n\n"
        f"Largest |bias| of the least-squares estimators (every column but the first): {worst_new:.3f}% "
        "(target < 1% with ≥ 1 cycle in the window).\n"
    )
    print(text)
    update_section("period_bias", text)


if __name__ == "__main__":
    main()
