"""Verdicts in seconds: ``pg.analyze`` on GPT-2 small with its defaults, fast nulls against exact.

Reads the real GPT-2 small table from ``../shared/data/real/gpt2_small_wpe.npy`` (never copied). Measures:

* ``pg.analyze(table)`` with the defaults (199 surrogates per null, α = 0.01; the recurrence's own 99 at
  α = 0.05), ``null_method="fast"`` against ``"exact"`` in the same run: wall time of a first call on
  the table (the per-table decomposition the nulls share is not reused across repeats: its memory is
  cleared before each), median of ``--repeats``, and the time of each analysis;
* the same verdicts: helix verdict and p-values, significant periods, recurrence status, for both methods;
* ``pos-geometry analyze gpt2=<that file>`` as a whole process (imports included), median of 3;
* ``pos-geometry reproduce`` without PNG export (``--format html``), once computed (``--force``) and once again
  from the results cache, with the real tables here;
* peak RSS of a process that loads the table and runs ``pg.analyze`` (``ru_maxrss``);
* the top-10 batched PCA of 64 GPT-2-sized tables against a scikit-learn loop ;
* ``--device cuda``: the same ``analyze`` with the table on the GPU, and the CPU/GPU agreement.

Usage::

    python benchmarks/bench_verdicts.py [--repeats 5] [--device cpu|cuda] [--skip-reproduce] [--no-write]

The report replaces the ``bench_verdicts`` (CPU) or ``bench_verdicts_cuda`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results_md import update_section
from bench_load import _machine, _versions

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO.parent / "shared" / "data" / "real" / "gpt2_small_wpe.npy"
CLI = [str(Path(sys.executable).with_name("pos-geometry"))]


def _fresh() -> None:
    """Forget what a previous call on the same table left behind (a first call on a new table)."""
    from pos_geometry.analysis.nulls import basis as _null_basis
    from pos_geometry.analysis.nulls import helix_test as _helix_test

    _null_basis._memory.set(None)
    _helix_test.rotation_scan.cache_clear()


def _timed_analyze(x, method: str, device: str):
    import pos_geometry as pg
    from pos_geometry.analysis import helix, periodicity, recurrence

    parts: dict[str, float] = {}

    def timer(name, fn):
        def wrapped(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - t

        return wrapped

    from pos_geometry.analysis import pipeline

    saved = pipeline.fit_helix, pipeline.periodicity, pipeline.fit_recurrence
    pipeline.fit_helix = timer("helix", helix.fit_helix)
    pipeline.periodicity = timer("periodicity", periodicity.periodicity)
    pipeline.fit_recurrence = timer("recurrence", recurrence.fit_recurrence)
    try:
        _fresh()
        if device == "cuda":
            import torch

            torch.cuda.synchronize()
        t = time.perf_counter()
        result = pg.analyze(x, null_method=method)
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t, parts, result
    finally:
        pipeline.fit_helix, pipeline.periodicity, pipeline.fit_recurrence = saved


def _verdicts(a) -> str:
    h = a.helix
    per = ", ".join(f"{p.label} {p.period:.0f} (p={p.p_value:.3g})" for p in a.periodicity.dominant_periods)
    rec = a.recurrence
    return (
        f"helix: {h.verdict} (p = {', '.join(f'{t.p_value:.3g}' for t in h.tests)}); periods: {per or 'none'}; "
        f"recurrence: {rec.status}" + (f" (p = {rec.test.p_value:.3g})" if rec.test is not None else "")
    )


def _run(cmd: list[str], **kw) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - t


def _peak_rss(device: str) -> float:
    # VmHWM of the child's own address space: ru_maxrss would start from the RSS of this (forking,
    # benchmark-sized) process, which a fork counts as the child's
    code = (
        "import numpy as np, torch, pos_geometry as pg;"
        f"x = torch.from_numpy(np.load({str(TABLE)!r})).to({device!r});"
        "pg.analyze(x);"
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1]) / 1024  # KiB -> MiB


def _batched_pca() -> tuple[float, float]:
    import numpy as np
    import torch
    from sklearn.decomposition import PCA

    import pos_geometry as pg

    rng = np.random.default_rng(0)
    base = np.load(TABLE)
    tables = np.stack([base + 0.01 * rng.standard_normal(base.shape).astype(np.float32) for _ in range(64)])
    batch = torch.from_numpy(tables)
    pg.pca(batch[:2], 10)
    t = time.perf_counter()
    pg.pca(batch, 10)
    ours = time.perf_counter() - t
    t = time.perf_counter()
    for table in tables:
        PCA(10, svd_solver="auto", random_state=0).fit_transform(table)
    return ours, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-reproduce", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()
    if not TABLE.is_file():
        raise SystemExit(f"{TABLE} is not there: this benchmark needs the real GPT-2 table in ../shared")

    import numpy as np
    import torch

    import pos_geometry as pg

    load_start = os.getloadavg()[0]
    x = torch.from_numpy(np.load(TABLE)).to(args.device)
    pg.analyze(x[:128], n_surrogates=9, alpha=0.1)  # imports and kernels warm
    fast = [_timed_analyze(x, "fast", args.device) for _ in range(args.repeats)]
    exact = _timed_analyze(x, "exact", args.device)
    fast_wall = statistics.median(t for t, _, _ in fast)
    parts = {k: statistics.median(p[k] for _, p, _ in fast) for k in fast[0][1]}
    speedup = exact[0] / fast_wall
    lines = [
        f"Machine: {_machine()}; {_versions()}; device {args.device}; load average at start {load_start:.2f}.",
        "",
        "Command: `.venv/bin/python benchmarks/bench_verdicts.py"
        + (f" --device {args.device}" if args.device != "cpu" else "")
        + "`",
        "",
        "| measurement | fast nulls | exact nulls |",
        "|---|---|---|",
        f"| `pg.analyze` on GPT-2 small, defaults (wall, first call on the table; median of {args.repeats}) "
        f"| **{fast_wall:.2f} s** (runs: {', '.join(f'{t:.2f}' for t, _, _ in fast)}) | {exact[0]:.1f} s "
        f"(one run) — **{speedup:.1f}×** |",
    ]
    for name in ("helix", "periodicity", "recurrence"):
        lines.append(
            f"| … `{name}` with its nulls (on the CPU the three run side by side: these overlap) "
            f"| {parts[name]:.2f} s | {exact[1][name]:.1f} s |"
        )
    lines.append(f"| verdicts | {_verdicts(fast[0][2])} | {_verdicts(exact[2])} |")
    if args.device == "cpu":
        cli = statistics.median(_run([*CLI, "analyze", f"gpt2={TABLE}", "--offline"]) for _ in range(3))
        lines.append(
            f"| `pos-geometry analyze gpt2=…/gpt2_small_wpe.npy --offline`, whole process (median of 3) | {cli:.2f} s | |"
        )
        if not args.skip_reproduce:
            with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as again:
                rep = _run([*CLI, "reproduce", "--out", out, "--format", "html", "--force"])  # computed
                hit = _run([*CLI, "reproduce", "--out", again, "--format", "html"])  # the results cache
            lines.append(
                f"| `pos-geometry reproduce --format html` (no PNG export), whole process | {rep:.1f} s | |"
            )
            lines.append(f"| … the same inputs again (from the results cache) | {hit:.1f} s | |")
        ours, sk = _batched_pca()
        lines.append(
            f"| top-10 PCA of 64 GPT-2-sized tables, one batch vs a scikit-learn loop | {ours:.2f} s vs "
            f"{sk:.2f} s = **{sk / ours:.1f}×** | |"
        )
    lines.append(
        f"| peak RSS of a process running `pg.analyze` on GPT-2 | {_peak_rss(args.device):.0f} MiB | |"
    )
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.2f}."]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        update_section("bench_verdicts" + ("" if args.device == "cpu" else f"_{args.device}"), text)


if __name__ == "__main__":
    main()
