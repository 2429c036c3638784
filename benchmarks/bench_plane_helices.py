"""Per-plane helices on a helix behind a smooth background: false planes (a helix at a period that is not
there) and power (the helix found by the top-3 fit or in its own plane).

    python benchmarks/bench_plane_helices.py --family helix+gp --tables 60

Families come from ``bench_calibration.draw`` (``helix+gp``: a helix of period n/6.8 at SNR 1 on a GP
background of twice its variance; ``helix+walk``: behind a walk of three times it; ``rotation+gp``: a
constant rotation of period n/3.4 on the GP background). Prints one line per table and a summary; writes
nothing (the figures go into RESULTS.md by hand, with the machine and the command).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_calibration import draw

import pos_geometry as pg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="helix+gp")
    parser.add_argument("--tables", type=int, default=60)
    parser.add_argument("--size", default="1024x64")
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    n, d = (int(v) for v in args.size.split("x"))
    true = n / 6.8 if args.family.startswith("helix") else n / 3.4
    rng = np.random.default_rng(args.seed)
    cache: dict = {}
    false = found = tested = 0
    for i in range(args.tables):
        a = pg.analyze(torch.from_numpy(draw(args.family, n, d, rng, cache)), analyses=("helix", "recurrence"),
                       n_surrogates=99, alpha=0.05, progress=False, random_state=i)  # fmt: skip
        planes = [(float(h.periods[0]), h.verdict, h.p_value) for h in a.helices if h.periods.size]
        tested += len(a.helices)
        helices = [p for p, v, _ in planes if v == "helix"]
        false += any(abs(p / true - 1) > 0.1 for p in helices)
        found += a.helix.verdict == "helix" or any(abs(p / true - 1) <= 0.1 for p in helices)
        print(i, a.helix.verdict, [(round(p), v, pv) for p, v, pv in planes], flush=True)
    print(f"{args.family} {n}x{d}: tables with a plane helix at a period that is not there {false}/{args.tables}; "
          f"helix at the true period (top-3 or plane) {found}/{args.tables}; planes tested {tested}")  # fmt: skip


if __name__ == "__main__":
    main()
