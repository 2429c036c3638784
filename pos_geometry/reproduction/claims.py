"""The claims of "GPT-2's positional embedding matrix is a helix", each measured and judged.

Every function here takes fitted results (an :class:`~pos_geometry.analysis.pipeline.Analysis`,
PCA fits of the truncation windows) or None when a table is missing, reads the numbers from them
(no claim decomposes a table again), and returns a :class:`Claim`: the post's statement,
the rule the verdict follows, what was measured, and the verdict. A claim whose table is
missing is ``"not measured"``; nothing is estimated in its place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.analysis.pipeline import Analysis
from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.reproduction.claim import VERDICTS, Claim
from pos_geometry.reproduction.claim import missing as _missing
from pos_geometry.reproduction.model_claims import claim_family, claim_helix, claim_rotary, claim_tokens
from pos_geometry.reproduction.periodic_claims import claim_columns, claim_similarity
from pos_geometry.reproduction.rules import COMBINE_RULE, FAILS, HOLDS, UNDECIDABLE, above, combine, within
from pos_geometry.reproduction.uncertainty import TOP3_NULLS, Interval, RunNull

__all__ = [
    "VERDICTS",
    "TRUNCATION_DIFFERENCES",
    "TRUNCATION_GAIN",
    "TRUNCATION_WINDOWS",
    "Claim",
    "claim_columns",
    "claim_family",
    "claim_helix",
    "claim_outliers",
    "claim_rotary",
    "claim_similarity",
    "claim_tokens",
    "claim_truncation",
    "claim_variance",
    "fit_windows",
    "top3",
]

TRUNCATION_WINDOWS: Mapping[str, tuple[int, int]] = {
    "all rows": (0, 1024),
    "rows 1–1023": (1, 1024),
    "rows 100–1023": (100, 1024),
    "rows 1–99": (1, 100),
}
"""The windows the post (and its code's early versions) used, as ``(start, stop)``."""

TRUNCATION_GAIN = "rows 100–1023 minus all rows"
"""The name of the truncation gain's interval: top-3 ratio of rows 100–1023 minus that of all rows."""
TRUNCATION_DIFFERENCES = {TRUNCATION_GAIN: ("rows 100–1023", "all rows")}


def top3(res: PCAResult) -> float:
    """Top-3 explained-variance ratio of a fitted PCA."""
    return float(res.explained_variance_ratio_[:3].sum())


def fit_windows(table: PositionalEmbedding, analysis: Analysis) -> dict[str, PCAResult]:
    """One exact PCA of ``table`` per truncation window of :data:`TRUNCATION_WINDOWS` that fits it; the
    window ``analysis`` (of the same table) already covers reuses its PCA."""
    out = {}
    for name, w in TRUNCATION_WINDOWS.items():
        if w[1] > table.n_positions:
            continue
        same = tuple(w) == tuple(analysis.window)
        out[name] = analysis.pca if same else pca(table, min(10, w[1] - w[0]), window=w, solver="exact")
    return out


_BAND = (0.85, 0.95)
"""What "about 90%" is read as: a top-3 ratio between 0.85 and 0.95."""


def _jackknife_words(interval: Interval) -> str:
    lo, hi = interval.leave_one_out
    return (
        f"{interval.level:.0%} jackknife interval [{interval.low:.3f}, {interval.high:.3f}] (leaving out any one of "
        f"{interval.n_blocks} blocks of positions gives {lo:.3f} to {hi:.3f})"
    )


def _null_words(ratio: float, nulls: Mapping[str, np.ndarray] | None) -> tuple[str, dict[str, Any]]:
    """How ``ratio`` compares with the top-3 ratios of the null tables: words and values."""
    if not nulls:
        return "", {}
    words, values = [], {}
    for null, drawn in nulls.items():
        p = (1 + int(np.sum(drawn >= ratio))) / (1 + len(drawn))
        words.append(
            f"{TOP3_NULLS.get(null, null)} give a median of {float(np.median(drawn)):.3f} "
            f"(the table's ratio is at or above {100 * float(np.mean(drawn <= ratio)):.0f}% of them; p = {p:.2g})"
        )
        values[f"null[{null}]"] = {
            "median": float(np.median(drawn)),
            "p_value": p,
            "n_surrogates": len(drawn),
        }
    return "; against its nulls, " + "; ".join(words), values


def claim_variance(
    gpt2: Analysis | None,
    lens: PCAResult | None = None,
    intervals: Mapping[str, Interval] | None = None,
    nulls: Mapping[str, np.ndarray] | None = None,
) -> Claim:
    """About 90% of the variance lies in the top three principal components."""
    statement = (
        "About 90% of the variance of GPT-2 small's positional matrix lies in its top 3 principal components."
    )
    criterion = (
        f"the 95% delete-one-block jackknife interval of the top-3 explained-variance ratio (PCA centred over "
        f"positions, all rows, raw weights) against [{_BAND[0]}, {_BAND[1]}]: reproduced when the interval lies "
        "inside it, not reproduced when it misses it, undecidable from this table when it crosses an edge. The "
        "same ratio of the helix verdict's null tables (random walks of the table's own steps, smooth GP "
        "curves of its length scale) says whether that much variance in 3 components is notable; it does not "
        "decide the claim, which is about the number"
    )
    if gpt2 is None:
        return _missing("variance_3d", statement, criterion, "GPT-2 small's table")
    raw = top3(gpt2.pca)
    lens_ratio = top3(lens) if lens is not None else float("nan")
    interval = (intervals or {}).get("all rows")
    low, high = (interval.low, interval.high) if interval is not None else (raw, raw)
    null_text, null_values = _null_words(raw, nulls)
    measured = (
        f"top-3 ratio {raw:.3f}"
        + (f"; {_jackknife_words(interval)}" if interval is not None else "")
        + null_text
        + f"; with TransformerLens's default processing (each row centred over d_model, as the post's code read "
        f"W_pos) it is {lens_ratio:.3f}"
    )
    values: dict[str, Any] = {"top3": raw, "top3_center_d_model": lens_ratio, **null_values}
    if interval is not None:
        values["top3_interval"] = interval.to_dict()
    verdict = combine([within(low, high, _BAND)])
    return Claim("variance_3d", statement, criterion, measured, verdict, values, (gpt2.provenance,))


def claim_truncation(
    windows: Mapping[str, PCAResult] | None,
    intervals: Mapping[str, Interval] | None = None,
    runs: RunNull | None = None,
) -> Claim:
    """The truncated views (dropping the first positions, or only the first 100) are closer to 3D."""
    statement = (
        "The truncated view (positions 100–1023) is cleaner: more of its variance lies in 3D than for all rows; "
        "the first 100 positions alone are also close to 3D."
    )
    criterion = (
        "two parts. (a) The gain, top-3 ratio of rows 100–1023 minus that of all rows, against the same gain from "
        "dropping any other run of 100 consecutive positions (every 8th start; dropping rows always moves the "
        "ratio): holds when the gain is positive and beats the other runs at p ≤ 0.05, fails when it is not "
        "positive, cannot be decided otherwise. (A jackknife over blocks of positions cannot judge it: leaving "
        "out the first block removes the effect being measured.) (b) The top-3 ratio of rows 1–99, by its 95% "
        f"delete-one-block jackknife interval: holds above {_BAND[0]}, fails below, cannot be decided when the "
        f"interval straddles it. {COMBINE_RULE[0].upper()}{COMBINE_RULE[1:]}"
    )
    if not windows:
        return _missing("truncation", statement, criterion, "GPT-2 small's table")
    ratios = {name: top3(res) for name, res in windows.items()}
    base, cut = ratios["all rows"], ratios["rows 100–1023"]
    first = ratios.get("rows 1–99")
    iv = intervals or {}
    first_iv = iv.get("rows 1–99")
    gain = cut - base
    if gain <= 0:
        gain_part = FAILS
    elif runs is None:
        gain_part = UNDECIDABLE  # no null to tell it from dropping any 100 rows
    else:
        gain_part = HOLDS if runs.p_value <= 0.05 else UNDECIDABLE
    first_part = (
        above(*((first_iv.low, first_iv.high) if first_iv else (first, first)), _BAND[0])
        if first is not None
        else UNDECIDABLE
    )
    rest = "; ".join(
        f"{name}: {r:.3f}" for name, r in ratios.items() if name not in ("all rows", "rows 100–1023")
    )
    measured = (
        f"(a) rows 100–1023: {cut:.3f} vs {base:.3f} for all rows, a gain of {gain:+.3f}"
        + (
            f"; dropping any other run of {runs.length} positions gains at most {max(runs.others):+.3f} (median "
            f"{float(np.median(runs.others)):+.3f}; p = {runs.p_value:.2g} over {len(runs.others)} runs)"
            if runs is not None and runs.others
            else ""
        )
        + f": {_PART_WORDS[gain_part]}; (b) {rest}"
        + (f" (rows 1–99: {_jackknife_words(first_iv)})" if first_iv is not None else "")
        + f": {_PART_WORDS[first_part]}"
    )
    values: dict[str, Any] = {f"top3[{name}]": r for name, r in ratios.items()}
    values |= {"parts": {"truncated_view_cleaner": gain_part, "first_100_close_to_3d": first_part}}
    values |= {f"interval[{k}]": v.to_dict() for k, v in iv.items()}
    if runs is not None:
        values["runs_null"] = runs.to_dict()
    verdict = combine([gain_part, first_part])
    return Claim(
        "truncation", statement, criterion, measured, verdict, values, (windows["all rows"].provenance,)
    )


_PART_WORDS = {
    HOLDS: "holds",
    FAILS: "fails",
    UNDECIDABLE: "cannot be decided (the interval straddles the threshold)",
}


def _steps(m: torch.Tensor) -> torch.Tensor:
    m = m.double()
    return (m[1:] - m[:-1]).norm(dim=1)


def claim_outliers(gpt2: PositionalEmbedding | None) -> Claim:
    """Position 0 and the last position are outliers."""
    statement = "Position 0 and position 1023 are outliers, off the helix traced by the other positions."
    criterion = (
        "the step ‖E[p] − E[p±1]‖ from each end position to its neighbour is larger than every interior step. "
        "Null: if the steps were exchangeable (a random walk of the table's own steps), each end step would be "
        "the largest of the n − 1 steps with probability 1/(n − 1); reproduced when both are, partly when one is"
    )
    if gpt2 is None:
        return _missing("outliers", statement, criterion, "GPT-2 small's table")
    steps = _steps(gpt2.matrix)
    median = float(steps.median())
    interior = float(steps[1:-1].max())
    first, last = float(steps[0]), float(steps[-1])
    norms = gpt2.matrix.double().norm(dim=1)
    n = gpt2.n_positions
    ok = first > interior and last > interior
    measured = (
        f"the steps 0→1 and {n - 2}→{n - 1} are {first / median:.1f}× and {last / median:.1f}× the median step, "
        f"the largest interior step {interior / median:.1f}×; row norms: position 0 {float(norms[0]):.3f}, "
        f"position {n - 1} {float(norms[-1]):.3f}, median {float(norms.median()):.3f}; with exchangeable steps "
        f"an end step is the largest with probability 1/{n - 1} = {1 / (n - 1):.1e}"
    )
    values = {
        "step_first_over_median": first / median,
        "step_last_over_median": last / median,
        "max_interior_step_over_median": interior / median,
        "norm_first": float(norms[0]),
        "norm_last": float(norms[-1]),
        "norm_median": float(norms.median()),
    }
    verdict = (
        "reproduced"
        if ok
        else ("partly reproduced" if first > interior or last > interior else "not reproduced")
    )
    return Claim("outliers", statement, criterion, measured, verdict, values, (gpt2.provenance,))
