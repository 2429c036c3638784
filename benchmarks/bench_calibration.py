"""Calibration of the verdicts: how often tables with no helix, no period and no rotation get one.

For each null family and size, ``--tables`` tables are drawn and passed to ``pg.analyze`` with its fast nulls
(``--surrogates`` per null, α = 0.05 for the run; the verdict at α = 0.01 is read from the same p-values,
since every other criterion of a verdict does not depend on α). The helix and recurrence nulls are
sequential (``analyze``'s default): a null that stops has p > 0.05, so a verdict at α = 0.05 means none of its
nulls stopped and its p-values are those of every surrogate; the counts are the full tests'. Counted, per cell:

* ``helix``: verdict ``"helix"`` (the helix shape wins by BIC, and its rotation share beats every null);
* ``period``: at least one significant period (a peak of the offset curve or of PC1..3, not at the band's edge);
* ``rotation``: recurrence status ``"rotations"``;
* ``plane helix``: a rotation's own plane called a helix (``Analysis.helices``);
* ``drifting``: a recurrence pair called drifting;
* ``repaired``: rows replaced before the analysis (``notes["outlier_rows"]``);
* ``linear image``: ``identify`` calls the table a linear image of a sinusoidal one;
* ``formula``: ``identify`` calls the table a sinusoidal or rotary formula (then no helix is fitted).

A false-positive rate passes when it is at most ``α + 2·SE``, ``SE = sqrt(α(1 − α)/N)``.

Families (none has a helix, a period or a rotation):

* ``walk``: random walks of GPT-2's own steps (``diff`` of the real table from ``../shared``, in random order,
  projected on a random ``d``-dimensional subspace when ``d < 768``); iid Gaussian steps when the table is absent.
  Its steps include the one out of GPT-2's outlier row 0, so it is not a null for the repaired-rows claim
  (``walk-curve``, :data:`EXTRA_NULLS`, is);
* ``ar1-0.5``, ``ar1-0.9``, ``ar1-0.99``: independent AR(1) columns;
* ``gp``: smooth Gaussian-process columns, squared-exponential kernel, length scale GPT-2's own
  (78.6 positions of 1024) scaled to ``n``;
* ``white``: iid Gaussian entries.

Usage::

    python benchmarks/bench_calibration.py [--tables 200] [--surrogates 99] [--sizes 256x64,1024x768]
        [--families walk,gp] [--seed 0] [--analyses helix] [--device cpu] [--no-write]

The report replaces the ``bench_calibration`` section of ``benchmarks/RESULTS.md`` (``--device cuda``: the
``bench_calibration_cuda`` section; the tables are drawn on the CPU with the same generator and analysed on
the device, whose nulls have the same distribution as the CPU's).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from _results_md import update_section
from bench_load import _machine, _versions

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO.parent / "shared" / "data" / "real" / "gpt2_small_wpe.npy"
FAMILIES = ("walk", "ar1-0.5", "ar1-0.9", "ar1-0.99", "gp", "white")
EXTRA_NULLS = ("gp-100", "gp-250", "gp16", "poly", "rotation+gp", "rotation+walk", "walk-curve")
"""More null families for the newer claims: GP curves of length scale 100 and 250 (per 1024 positions), a GP
curve stored in float16, polynomials of degree 3-8, a constant rotation (period n/3.4) on a GP background
of twice its variance or a walk of three times it (a null for "drifting" and for a helix at another period),
and walks of GPT-2's steps between positions 1..1023 only (``walk-curve``): the null of the repaired-rows claim
among walks. ``walk`` draws every step of the table, the one out of its outlier row 0 too (54 times the median
step): where that step falls within a few rows of an end, the rows past it are set apart by one jump, which
is what the repair is for, so on ``walk`` a repair is the family's structure (▲), not a false positive."""
POSITIVES = ("chirp-3", "chirp-5", "chirp-10", "jump", "helix+walk", "helix+gp", "image-noisy", "image-1pct")
"""Families with the structure a claim names, for its power: chirps of 3, 5 and 10% over the window and a jump
from period n/3.4 to n/4.1 halfway (drifting), a helix of period n/6.8 behind a walk of three times its
variance or a GP background of twice it (helix, per-plane helix), and a sinusoidal table under a dense map of
condition about 10 with white noise of 1e-6 or 1e-2 of its largest entry (linear image)."""
SIZES = ((256, 64), (256, 768), (1024, 64), (1024, 768))
ANALYSES = ("helix", "periodicity", "recurrence")
VERDICTS = {"helix": "helix", "period": "periodicity", "rotation": "recurrence"}
GPT2_LENGTH_SCALE = 78.6  # of 1024 positions: GPT-2's own (the smooth-GP null's estimate on its table)


def _gp_factor(n: int, ell: float) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    k = np.exp(-((t[:, None] - t[None, :]) ** 2) / (2 * ell**2))
    w, v = np.linalg.eigh(k)
    return v * np.sqrt(np.clip(w, 0, None))


def draw(family: str, n: int, d: int, rng: np.random.Generator, cache: dict) -> np.ndarray:
    """One ``(n, d)`` float32 table of ``family``."""
    if family in ("walk", "walk-curve"):
        steps = cache.get("steps")
        if steps is not None and family == "walk-curve":
            steps = steps[1:]  # the curve's steps: not the one out of GPT-2's outlier row 0
        if steps is None:
            steps = rng.standard_normal((1023, 768))
        picked = steps[rng.choice(steps.shape[0], size=n - 1, replace=n - 1 > steps.shape[0])]
        if d < picked.shape[1]:
            picked = picked @ np.linalg.qr(rng.standard_normal((picked.shape[1], d)))[0]
        table = np.concatenate([np.zeros((1, d)), np.cumsum(picked, axis=0)])
    elif family.startswith("ar1-"):
        phi = float(family.split("-", 1)[1])
        eps = rng.standard_normal((n + 200, d))
        table = np.empty_like(eps)
        table[0] = eps[0]
        for i in range(1, n + 200):
            table[i] = phi * table[i - 1] + eps[i]
        table = table[200:]
    elif family == "gp":
        key = ("gp", n)
        if key not in cache:
            cache[key] = _gp_factor(n, GPT2_LENGTH_SCALE * n / 1024)
        table = cache[key] @ rng.standard_normal((n, d)) + 1e-3 * rng.standard_normal((n, d))
    elif family == "white":
        table = rng.standard_normal((n, d))
    elif family in ("gp-100", "gp-250", "gp16"):
        ell = {"gp-100": 100.0, "gp-250": 250.0, "gp16": GPT2_LENGTH_SCALE}[family] * n / 1024
        key = ("gp", n, ell)
        if key not in cache:
            cache[key] = _gp_factor(n, ell)
        table = cache[key] @ rng.standard_normal((n, d))
        if family == "gp16":
            return table.astype(np.float16)
    elif family == "poly":
        u = np.linspace(-1, 1, n)[:, None] ** np.arange(int(rng.integers(3, 9)) + 1)[None]
        table = u @ rng.standard_normal((u.shape[1], d))
    elif family in POSITIVES or family.startswith("rotation+"):
        table = _structured(family, n, d, rng, cache)
    else:
        raise SystemExit(f"unknown family {family!r}; choose from {FAMILIES + EXTRA_NULLS + POSITIVES}")
    return table.astype(np.float32)


def _background(
    kind: str, n: int, d: int, rng: np.random.Generator, cache: dict, variance: float
) -> np.ndarray:
    """A smooth background of ``variance`` times a unit circle's (per row, summed over columns: ``d``)."""
    if kind == "walk":
        g = rng.standard_normal((n, d)).cumsum(0)
    else:
        key = ("gp", n, GPT2_LENGTH_SCALE * n / 1024)
        if key not in cache:
            cache[key] = _gp_factor(n, key[2])
        g = cache[key] @ rng.standard_normal((n, d))
    g = g - g.mean(0)
    return g / np.sqrt((g**2).sum(1).mean()) * np.sqrt(d * variance)


def _structured(family: str, n: int, d: int, rng: np.random.Generator, cache: dict) -> np.ndarray:
    """One table of a family with structure (:data:`POSITIVES`) or of a rotation on a background."""
    t = np.arange(n, dtype=np.float64)
    if family in ("image-noisy", "image-1pct"):
        k = d // 2
        s = np.concatenate([np.sin(np.outer(t, 1e4 ** (-2 * np.arange(k) / d))),
                            np.cos(np.outer(t, 1e4 ** (-2 * np.arange(k) / d)))], axis=1)  # fmt: skip
        q1, q2 = (np.linalg.qr(rng.standard_normal((d, d)))[0] for _ in range(2))
        a = q1 @ np.diag(np.geomspace(1, 10, d)) @ q2  # condition number 10
        x = s @ a
        level = 1e-6 if family == "image-noisy" else 1e-2
        return x + level * np.abs(x).max() * rng.standard_normal(x.shape)
    p0 = n / 3.4
    if family.startswith("chirp-"):
        p1 = p0 * (1 - int(family.split("-")[1]) / 100)
        phase = 2 * np.pi * (t / p0 + (1 / p1 - 1 / p0) * t**2 / (2 * n))
    elif family == "jump":
        p1 = n / 4.1
        half = n // 2
        phase = np.where(t < half, 2 * np.pi * t / p0, 2 * np.pi * ((half - 1) / p0 + (t - half + 1) / p1))
    elif family.startswith("helix+"):
        phase = 2 * np.pi * t / (n / 6.8)
    else:  # rotation+gp, rotation+walk: a constant rotation
        phase = 2 * np.pi * t / p0
    basis = np.linalg.qr(rng.standard_normal((d, 3)))[0]
    axis = (t - t.mean()) / n if family.startswith("helix+") else np.zeros(n)
    x = np.stack([np.cos(phase), np.sin(phase), axis], axis=1) @ basis.T * np.sqrt(d)
    noise = rng.standard_normal((n, d))  # SNR 1: white noise of the circle's variance
    if family in ("helix+walk", "rotation+walk"):
        return x + noise + _background("walk", n, d, rng, cache, 3.0)
    if family in ("helix+gp", "rotation+gp"):
        return x + noise + _background("gp", n, d, rng, cache, 2.0)
    return x + noise


def _outcomes(a, family: str = "") -> dict[str, float]:
    """The smallest α at which each verdict is reached (inf: not at α = 0.05, hence not at 0.01 either).

    Reaching a verdict at α = 0.01 needs it at 0.05 (every other criterion does not depend on α) and the
    deciding p-value ≤ 0.01. On a constant rotation behind a background (``rotation+gp``, ``rotation+walk``)
    a helix, a plane helix or a rotation at the rotation's own period (within 10% of n/3.4) is the rotation
    found, not a false claim: only one at another period counts (a rotation found at its own period is
    returned apart, as ``own rotation``, its power).
    """
    h, per, rec = a.helix, a.periodicity, a.recurrence
    own = (lambda period: abs(float(period) / (a.n_positions / 3.4) - 1) <= 0.1) if family.startswith(
        "rotation+"
    ) else (lambda period: False)  # fmt: skip
    if h is not None and h.verdict == "helix" and len(h.periods) and own(h.periods[0]):
        h = None
    planes = [
        f.p_value
        for f in a.helices
        if f.verdict == "helix" and f.p_value is not None and not (len(f.periods) and own(f.periods[0]))
    ]
    rotating = rec is not None and rec.status == "rotations" and rec.test
    periods = [p for p, *_ in rec.rotation_periods()] if rotating else []
    found = 0.0  # a claim without an α of its own: made (0) or not (inf)
    return {
        "helix": max(t.p_value for t in h.tests) if h is not None and h.verdict == "helix" else math.inf,
        "period": min((p.p_value for p in per.peaks if not p.at_edge), default=math.inf) if per else math.inf,
        "rotation": rec.test.p_value if rotating and not all(own(p) for p in periods) else math.inf,
        "own rotation": rec.test.p_value if rotating and any(own(p) for p in periods) else math.inf,
        "plane helix": min(planes, default=math.inf),
        "drifting": found if rec is not None and "drifting" in rec.pair_classes else math.inf,
        "repaired": found if "replaced by interpolation" in a.notes.get("outlier_rows", "") else math.inf,
        "linear image": found if a.identity is not None and a.identity.kind == "linear image" else math.inf,
        "formula": found if a.identity is not None and a.identity.is_formula else math.inf,
    }


def _details(a, outcome: dict[str, float]) -> str:
    """One table's claims in words, with the periods each one found (``--details``)."""
    words = [f"{w} (p {v:.3g})" if v > 0 else w for w, v in outcome.items() if math.isfinite(v)]
    if a.helix is not None and a.helix.verdict == "helix":
        words.append(f"helix periods {[round(float(p), 1) for p in a.helix.periods]}")
    if a.recurrence is not None and a.recurrence.status == "rotations":
        words.append(f"rotation periods {[round(p, 1) for p, *_ in a.recurrence.rotation_periods()]}")
    planes = [
        (round(float(h.periods[0]), 1), h.p_value)
        for h in a.helices
        if h.verdict == "helix" and len(h.periods)
    ]
    if planes:
        words.append(f"plane helices (period, p) {planes}")
    return "; ".join(words)


CLAIMS = ("helix", "period", "rotation", "plane helix", "drifting", "repaired", "linear image", "formula")
"""Every claim counted. ``helix``, ``period``, ``rotation`` and ``plane helix`` are decided at α (0.01 and
0.05); ``drifting`` is decided at its own 0.05 (and counted against that bound); ``repaired``, ``linear
image`` and ``formula`` (``identify`` names a sinusoidal or rotary table, which turns the helix off) have no α
and are counted against the α = 0.01 bound."""
NEEDS = {"helix": "helix", "period": "periodicity", "rotation": "recurrence", "plane helix": "helix",
         "drifting": "recurrence", "linear image": "identify", "formula": "identify"}  # fmt: skip


POWER = {
    "chirp-3": ("drifting", "period", "rotation"), "chirp-5": ("drifting", "period", "rotation"),
    "chirp-10": ("drifting", "period", "rotation"), "jump": ("drifting", "period", "rotation"),
    "helix+walk": ("helix", "plane helix", "period", "rotation"),
    "helix+gp": ("helix", "plane helix", "period", "rotation"),
    "rotation+gp": ("period",), "rotation+walk": ("period",), "walk": ("repaired",),
    "image-noisy": ("linear image", "period", "rotation"),
    "image-1pct": ("linear image", "period", "rotation"),
}  # fmt: skip
"""The claims a family's structure makes true: their counts are power."""


def _levels(what: str) -> list[tuple[float, float]]:
    """``[(α the claim is read at, α of the bound it is held to)]``."""
    if what in ("helix", "period", "rotation", "plane helix"):
        return [(0.01, 0.01), (0.05, 0.05)]
    return [(0.0, 0.05 if what == "drifting" else 0.01)]


def _headers() -> list[str]:
    return [f"{w} α=.{str(al)[2:]}" if w in ("helix", "period", "rotation", "plane helix") else w
            for w in CLAIMS for al, _ in _levels(w)]  # fmt: skip


def run(args: argparse.Namespace) -> str:
    import torch

    import pos_geometry as pg

    rng = np.random.default_rng(args.seed)
    analyses = tuple(args.analyses.split(","))
    if analyses == ("heads",):  # the card's per-head claim: random models, not tables
        from _head_calibration import HEAD_NULLS, HEAD_POWER, run_heads

        asked = [f for f in args.families.split(",") if f in HEAD_NULLS + HEAD_POWER]
        return "\n".join([
            f"Machine: {_machine()}; {_versions()}.",
            f"Command: `python benchmarks/bench_calibration.py --analyses heads --tables {args.tables} "
            f"--families {','.join(asked or HEAD_NULLS + HEAD_POWER)} --seed {args.seed}`",
            *run_heads(args.tables, asked or list(HEAD_NULLS + HEAD_POWER), args.seed),
        ])  # fmt: skip
    cache: dict = {}
    if TABLE.exists():
        cache["steps"] = np.diff(np.load(TABLE).astype(np.float64), axis=0)
    lines = [
        f"Machine: {_machine()}"
        + (f", GPU {torch.cuda.get_device_name()}" if args.device.startswith("cuda") else "")
        + f"; {_versions()}.",
        f"Command: `python benchmarks/bench_calibration.py --tables {args.tables} --surrogates {args.surrogates} "
        f"--sizes {args.sizes} --families {args.families} --seed {args.seed}"
        + (f" --analyses {args.analyses}" if args.analyses != ",".join(ANALYSES) else "")
        + (f" --device {args.device}`" if args.device != "cpu" else "`"),
        f"Walk steps: {'GPT-2 small real table (../shared)' if 'steps' in cache else 'iid Gaussian (no GPT-2 table)'}. "
        f"Fast nulls, {args.surrogates} surrogates per null; a rate passes when ≤ α + 2·SE.",
        "",
        "Claims with an α are counted at α = 0.01 and 0.05; `drifting` at its own 0.05; `repaired`, `linear "
        "image` and `formula` (no α) against the α = 0.01 bound. On a family with structure (chirps, jumps, helices behind "
        "backgrounds, noisy images) the count of the claim it carries is its power, marked ▲, not a failure.",
        "",
        "| family | n×d | N | " + " | ".join(_headers()) + " | s/table |",
        "|---|---|---|" + "---|" * len(_headers()) + "---|",
    ]
    failures, notes = [], []
    for family in args.families.split(","):
        for size in args.sizes.split(","):
            n, d = (int(v) for v in size.split("x"))
            t0 = time.perf_counter()
            found = []
            for _ in range(args.tables):
                table = draw(family, n, d, rng, cache)
                table = torch.from_numpy(table).to(args.device)
                if analyses == ("identify",):  # identify's claims alone: identify is all they need
                    ident = pg.identify(table)
                    made = {"linear image": ident.kind == "linear image", "formula": ident.is_formula}
                    found.append({w: 0.0 if made.get(w) else math.inf for w in CLAIMS})
                    continue
                a = pg.analyze(table, n_surrogates=args.surrogates, alpha=0.05, progress=False,
                               analyses=analyses, random_state=int(rng.integers(2**31)))  # fmt: skip
                found.append(_outcomes(a, family))
                if args.details and any(math.isfinite(v) for v in found[-1].values()):
                    print(f"  {family} {n}×{d} table {len(found) - 1}: {_details(a, found[-1])}",
                          file=sys.stderr, flush=True)  # fmt: skip
                if len(found) % 10 == 0:  # a running count, so a cut-off run still says something
                    print(f"  {family} {n}×{d}: {len(found)} tables, "
                          + ", ".join(f"{w}: {sum(o[w] <= 0.05 for o in found)}" for w in CLAIMS),
                          file=sys.stderr, flush=True)  # fmt: skip
            per_table = (time.perf_counter() - t0) / args.tables
            cells = []
            for what in CLAIMS:
                ran = analyses if analyses == ("identify",) else (*analyses, "pca", "identify")
                if NEEDS.get(what, "pca") not in ran:
                    cells += ["—"] * len(_levels(what))
                    continue
                for alpha, bound_alpha in _levels(what):
                    k = sum(o[what] <= alpha for o in found)
                    bound = bound_alpha + 2 * math.sqrt(bound_alpha * (1 - bound_alpha) / args.tables)
                    if what in POWER.get(family, ()):
                        cells.append(f"{k}/{args.tables} ▲")
                        continue
                    ok = k / args.tables <= bound
                    if not ok:
                        failures.append(f"{family} {n}×{d} {what} α={alpha}: {k}/{args.tables} > {bound:.3f}")
                    cells.append(f"{k}/{args.tables} {'✓' if ok else '✗'}")
            lines.append(
                f"| {family} | {n}×{d} | {args.tables} | " + " | ".join(cells) + f" | {per_table:.2f} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
            if family.startswith("rotation+") and "recurrence" in analyses:
                own = [sum(o["own rotation"] <= al for o in found) for al in (0.01, 0.05)]
                notes.append(f"{family} {n}×{d}: the rotation found at its own period (power) in {own[0]}/"
                             f"{args.tables} at α = 0.01 and {own[1]}/{args.tables} at α = 0.05")  # fmt: skip
    lines += ["", "Out of bounds: " + ("; ".join(failures) if failures else "none") + "."]
    if notes:
        lines += ["", "On the rotation families the helix, plane-helix and rotation columns count claims at "
                  "another period than the rotation's (n/3.4, within 10%); " + "; ".join(notes) + "."]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--surrogates", type=int, default=99)
    parser.add_argument("--sizes", default=",".join(f"{n}x{d}" for n, d in SIZES))
    parser.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"comma-separated; nulls {','.join(FAMILIES + EXTRA_NULLS)}; with structure {','.join(POSITIVES)}",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--analyses",
        default=",".join(ANALYSES),
        help="which analyses to run (the others' columns are left blank): helix, periodicity, recurrence; "
        "or identify alone (the linear-image and formula columns only); or heads alone (the card's per-head claim on random "
        "rotary models, --tables of them per family: weights-gauss, weights-t3, weights-rowscale, lean-1.02, "
        "lean-1.05; its own section)",
    )
    parser.add_argument("--device", default="cpu", help="where the tables are analysed (cpu, cuda)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--details",
        action="store_true",
        help="print each table that makes a claim, with the periods it found",
    )
    args = parser.parse_args()
    report = run(args)
    print(report)
    if not args.no_write:
        section = "bench_calibration" if args.device == "cpu" else f"bench_calibration_{args.device}"
        update_section(section + ("_heads" if args.analyses == "heads" else ""), report)


if __name__ == "__main__":
    main()
