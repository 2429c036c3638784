"""Calibration of the verdicts: how often tables with no helix, no period and no rotation get one.

For each null family and size, ``--tables`` tables are drawn and passed to ``pg.analyze`` with its fast nulls
(``--surrogates`` per null, α = 0.05 for the run; the verdict at α = 0.01 is read from the same p-values,
since every other criterion of a verdict does not depend on α). The helix and recurrence nulls are
sequential (``analyze``'s default): a null that stops has p > 0.05, so a verdict at α = 0.05 means none of its
nulls stopped and its p-values are those of every surrogate; the counts are the full tests'. Counted, per cell:

* ``helix``: verdict ``"helix"`` (the helix shape wins by BIC, and its rotation share beats every null);
* ``period``: at least one significant period (a peak of the offset curve or of PC1..3, not at the band's edge);
* ``rotation``: recurrence status ``"rotations"``.

A false-positive rate passes when it is at most ``α + 2·SE``, ``SE = sqrt(α(1 − α)/N)``.

Families (none has a helix, a period or a rotation):

* ``walk``: random walks of GPT-2's own steps (``diff`` of the real table from ``../shared``, in random order,
  projected on a random ``d``-dimensional subspace when ``d < 768``); iid Gaussian steps when the table is absent;
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
    if family == "walk":
        steps = cache.get("steps")
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
    else:
        raise SystemExit(f"unknown family {family!r}; choose from {FAMILIES}")
    return table.astype(np.float32)


def _outcomes(a) -> dict[str, float]:
    """The smallest α at which each verdict is reached (inf: not at α = 0.05, hence not at 0.01 either).

    Reaching a verdict at α = 0.01 needs it at 0.05 (every other criterion does not depend on α) and the
    deciding p-value ≤ 0.01.
    """
    h, per, rec = a.helix, a.periodicity, a.recurrence
    return {
        "helix": max(t.p_value for t in h.tests) if h is not None and h.verdict == "helix" else math.inf,
        "period": min((p.p_value for p in per.peaks if not p.at_edge), default=math.inf) if per else math.inf,
        "rotation": rec.test.p_value
        if rec is not None and rec.status == "rotations" and rec.test
        else math.inf,
    }


def run(args: argparse.Namespace) -> str:
    import torch

    import pos_geometry as pg

    rng = np.random.default_rng(args.seed)
    analyses = tuple(args.analyses.split(","))
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
        "| family | n×d | N | helix α=.01 | helix α=.05 | period α=.01 | period α=.05 | rotation α=.01 | rotation α=.05 | s/table |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    failures = []
    for family in args.families.split(","):
        for size in args.sizes.split(","):
            n, d = (int(v) for v in size.split("x"))
            t0 = time.perf_counter()
            found = []
            for _ in range(args.tables):
                table = draw(family, n, d, rng, cache)
                table = torch.from_numpy(table).to(args.device)
                a = pg.analyze(table, n_surrogates=args.surrogates, alpha=0.05, progress=False,
                               analyses=analyses, random_state=int(rng.integers(2**31)))  # fmt: skip
                found.append(_outcomes(a))
                if len(found) % 10 == 0:  # a running count, so a cut-off run still says something
                    print(f"  {family} {n}×{d}: {len(found)} tables, "
                          + ", ".join(f"{w} α={al}: {sum(o[w] <= al for o in found)}" for w in ("helix", "period", "rotation") for al in (0.01, 0.05)),
                          file=sys.stderr, flush=True)  # fmt: skip
            per_table = (time.perf_counter() - t0) / args.tables
            cells = []
            for what in ("helix", "period", "rotation"):
                if VERDICTS[what] not in analyses:
                    cells += ["—", "—"]
                    continue
                for alpha in (0.01, 0.05):
                    k = sum(o[what] <= alpha for o in found)
                    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / args.tables)
                    ok = k / args.tables <= bound
                    if not ok:
                        failures.append(f"{family} {n}×{d} {what} α={alpha}: {k}/{args.tables} > {bound:.3f}")
                    cells.append(f"{k}/{args.tables} {'✓' if ok else '✗'}")
            lines.append(
                f"| {family} | {n}×{d} | {args.tables} | " + " | ".join(cells) + f" | {per_table:.2f} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", "Out of bounds: " + ("; ".join(failures) if failures else "none") + "."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--surrogates", type=int, default=99)
    parser.add_argument("--sizes", default=",".join(f"{n}x{d}" for n, d in SIZES))
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--analyses",
        default=",".join(ANALYSES),
        help="which analyses to run (the others' columns are left blank): helix, periodicity, recurrence",
    )
    parser.add_argument("--device", default="cpu", help="where the tables are analysed (cpu, cuda)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    report = run(args)
    print(report)
    if not args.no_write:
        update_section(
            "bench_calibration" if args.device == "cpu" else f"bench_calibration_{args.device}", report
        )


if __name__ == "__main__":
    main()
