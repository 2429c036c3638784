"""The post's claims about periodicity: the offset curve of cosine similarities, and sine-like columns.

Like :mod:`pos_geometry.reproduction.claims`, each function reads fitted results (a
:class:`~pos_geometry.analysis.periodicity.PeriodicityResult`, null shares) and returns a :class:`Claim`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pos_geometry.analysis.periodicity import PeriodicityResult
from pos_geometry.reproduction.claim import Claim
from pos_geometry.reproduction.claim import missing as _missing

__all__ = ["MIN_CYCLES", "claim_columns", "claim_similarity"]

MIN_CYCLES = 2
"""Cycles a period must complete in the window before its absence of significance can count against it."""


def claim_similarity(result: PeriodicityResult | None) -> Claim:
    """The cosine similarity between rows is periodic in their offset."""
    statement = "The cosine similarity between positional rows is periodic in the offset between positions."
    n_s, alpha = (result.n_surrogates, result.alpha) if result is not None else (199, 0.01)
    criterion = (
        f"a significant period in the mean cosine similarity by offset: its power above the curve's own "
        f"background (AR(1)-plus-white or running median, raised where a null family's surrogates sit higher), "
        f"against whole tables of red noise, random walks of its steps and smooth GP curves through the same "
        f"pipeline ({n_s} surrogates each, α = {alpha}, family-wise over the offset curve and PC1–3; a period "
        "must beat all three); periods are least-squares fits inside the band. Reproduced when a period is "
        f"significant; undecidable from this table when the strongest has fewer than {MIN_CYCLES} cycles in the "
        "window (so few cycles cannot be told apart from a smooth curve, whatever the test) or sits at the band's "
        "edge; else not reproduced"
    )
    if result is None:
        return _missing("similarity", statement, criterion, "GPT-2 small's table")
    offset_peaks = [p for p in result.peaks if p.series == "mean_similarity"]
    peaks = [p for p in offset_peaks if p.significant]
    sim = result.mean_similarity
    at = {o: float(sim[o]) for o in (1, 64, 256, 512) if o < result.n_positions}
    strongest = offset_peaks[0] if offset_peaks else None
    if strongest is None:
        found = "no spectral peak in the band"
    elif strongest.at_edge:
        found = f"strongest peak at the band edge ({strongest.reason})"
    else:
        found = (
            f"strongest period {strongest.period_words} positions, p = "
            f"{strongest.p_value:.3g} against red noise, random walks of its own steps and smooth GP curves "
            f"({'significant' if strongest.significant else 'not significant'})"
        )
    pcs = [p for p in result.peaks if p.significant and p.series != "mean_similarity"]
    if pcs:
        found += "; the PCA coordinates do turn periodically: " + ", ".join(
            f"{p.label} {p.period:.0f} (p = {p.p_value:.3g})" for p in pcs
        )
    else:  # the strongest peak of each PC, said not to be a period
        strongest_pc = {}
        for p in result.peaks:
            if p.series != "mean_similarity" and not p.at_edge and p.series not in strongest_pc:
                strongest_pc[p.series] = p
        if strongest_pc:
            found += (
                "; nor are the PCA coordinates' oscillations ("
                + ", ".join(f"{p.label} {p.period:.0f}, p = {p.p_value:.3g}" for p in strongest_pc.values())
                + "): a random walk's PCA makes cosines as clean"
            )
    measured = (
        found
        + "; mean similarity at offset "
        + ", ".join(f"{o}: {v:.3f}" for o, v in at.items())
        + f"; Toeplitz score {result.toeplitz_score:.3f} (share of the similarity explained by the offset alone)"
    )
    cycles = result.n_positions / strongest.period if strongest is not None and strongest.period else 0.0
    if peaks:
        verdict = "reproduced"
    elif strongest is None or strongest.at_edge or cycles < MIN_CYCLES:
        verdict = "undecidable from this table"
        measured += (
            f"; the strongest period completes {cycles:.2f} cycles in the {result.n_positions}-position window: with "
            f"fewer than {MIN_CYCLES} a period cannot be told apart from a smooth curve, so this table cannot "
            "decide the claim"
        )
    else:
        verdict = "not reproduced"
    strongest_pc: dict[str, Any] = {}
    for p in result.peaks:
        if p.series != "mean_similarity" and not p.at_edge and p.series not in strongest_pc:
            strongest_pc[p.series] = {"period": p.period, "p_value": p.p_value, "significant": p.significant}
    values = {
        "periods": [p.period for p in offset_peaks],
        "p_values": [p.p_value for p in offset_peaks],
        "significant": [p.significant for p in offset_peaks],
        "cycles_in_window": cycles,
        "null": result.null,
        "n_surrogates": result.n_surrogates,
        "pc_periods": strongest_pc,
        "toeplitz_score": result.toeplitz_score,
        "mean_similarity_at": at,
    }
    return Claim("similarity", statement, criterion, measured, verdict, values, (result.provenance,))


def claim_columns(
    result: PeriodicityResult | None, nulls: Mapping[str, Mapping[str, np.ndarray]] | None = None
) -> Claim:
    """Individual columns of the table look like sine waves (and more so than smooth random curves' columns)."""
    statement = "Individual columns of the matrix look like sine waves of the position."
    criterion = (
        "share of columns whose best single sinusoid (free period, phase and offset) has R² ≥ 0.5, and the "
        "columns' median R² against the same in the helix verdict's null tables (random walks of the table's "
        "own steps, smooth GP curves of its length scale; drawn in the stored basis, whose columns these are): "
        "reproduced when the share is ≥ 50% and the median R² beats both nulls at α = 0.05; partly reproduced "
        "when the share is ≥ 10% and the median R² beats one; else not reproduced (any smooth curve's columns "
        "look like sine waves)"
    )
    if result is None:
        return _missing("columns", statement, criterion, "GPT-2 small's table")
    r2 = result.column_r2.double().cpu()
    shares = {t: float((r2 >= t).double().mean()) for t in (0.5, 0.9)}
    good = r2 >= 0.5
    periods = result.column_periods.double().cpu()[good]
    median_period = float(periods.median()) if periods.numel() else None
    measured = (
        f"{100 * shares[0.5]:.1f}% of the {r2.numel()} columns have R² ≥ 0.5 and {100 * shares[0.9]:.1f}% have "
        f"R² ≥ 0.9 (median R² {float(r2.median()):.3f})"
        + (
            f"; the well-fitted columns' median period is {median_period:.0f} positions"
            if median_period
            else ""
        )
    )
    values: dict[str, Any] = {
        "share_r2_0.5": shares[0.5],
        "share_r2_0.9": shares[0.9],
        "median_r2": float(r2.median()),
    }
    beaten = 0
    if nulls:
        words = []
        median = float(r2.median())
        for null, drawn in nulls.items():
            p = (1 + int(np.sum(drawn["median_r2"] >= median))) / (1 + len(drawn["median_r2"]))
            beaten += p <= 0.05
            words.append(
                f"{_NULL_NAMES.get(null, null)}: {100 * float(np.median(drawn['share'])):.0f}% of columns, median R² "
                f"{float(np.median(drawn['median_r2'])):.3f} (p = {p:.2g} for the median R²)"
            )
            values[f"null[{null}]"] = {
                "median_share": float(np.median(drawn["share"])),
                "median_r2": float(np.median(drawn["median_r2"])),
                "p_value": p,
                "n_surrogates": len(drawn["median_r2"]),
            }
        n_drawn = len(next(iter(nulls.values()))["median_r2"])
        measured += f"; in the null tables (medians over {n_drawn} surrogates per null): " + "; ".join(words)
    else:
        beaten = len(_NULL_NAMES)  # no null given: the threshold alone decides (tests of the measurement)
    if shares[0.5] >= 0.5 and beaten == len(_NULL_NAMES):
        verdict = "reproduced"
    elif shares[0.5] >= 0.1 and beaten >= 1:
        verdict = "partly reproduced"
    else:
        verdict = "not reproduced"
    return Claim("columns", statement, criterion, measured, verdict, values, (result.provenance,))


_NULL_NAMES = {"step_walk": "random walks of its steps", "smooth_gp": "smooth GP curves"}
