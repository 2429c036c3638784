"""GGUF atlas benchmark: the rotary atlas of the real SmolLM2-135M GGUF vs loading it with transformers.

Reads ``../shared/data/real_models/smollm2_135m_instruct_q4_1.gguf`` (98 MB, Q4_1; never copied). Every run
in a fresh subprocess (peak RSS per run, imports excluded for both: ``pos_geometry.rotary_atlas`` and
``transformers.AutoModelForCausalLM`` are resolved before the clock starts; what either imports inside the
call is counted):

* ``pos_geometry``: ``rotary_atlas(path)`` on every layer × head × plane (the header, then only the q/k
  tensors' bytes, dequantised by ``gguf.quants``), once on an empty ``POS_GEOMETRY_CACHE`` (a first read) and
  ``--reps`` times after it (a model read before);
* ``transformers``: ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)`` (float32), then every
  layer's ``q_proj``/``k_proj`` weight.

Per run: time of the call, peak RSS above the RSS after imports (VmHWM), and for pos_geometry the bytes
it read from the file, against the q/k tensors' bytes plus the header. Both methods' total ‖W_q‖² must
agree (they decode the same bytes).

Usage::

    python benchmarks/bench_gguf_atlas.py [--reps 3]

The report replaces the ``bench_gguf_atlas`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _results_md import update_section
from bench_load import _machine, _reset_peak, _status_kib, _versions

REPO = Path(__file__).resolve().parents[1]
GGUF = REPO.parent / "shared" / "data" / "real_models" / "smollm2_135m_instruct_q4_1.gguf"
MiB = 1 << 20


def _method(name: str) -> Any:
    """Import what ``name`` needs; return ``path -> (total ‖W_q‖², bytes read or None)``."""
    if name == "pos_geometry":
        import pos_geometry
        from pos_geometry.sources.opening import open_checkpoint

        rotary_atlas = pos_geometry.rotary_atlas

        def atlas(path: str) -> tuple[float, int | None]:
            checkpoint = open_checkpoint(path)
            result = rotary_atlas(checkpoint)
            return float((result.q_norm.double() ** 2).sum()), checkpoint.bytes_read

        return atlas
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()

    def load(path: str) -> tuple[float, int | None]:
        model = AutoModelForCausalLM.from_pretrained(str(Path(path).parent), gguf_file=Path(path).name)
        total = 0.0
        for layer in model.model.layers:
            q = layer.self_attn.q_proj.weight.detach().to(torch.float64)
            total += float((q**2).sum())
        return total, None

    return load


def worker(name: str, path: str) -> dict[str, Any]:
    fn = _method(name)
    gc.collect()
    hwm = _reset_peak()
    base = _status_kib("VmRSS") or 0
    t = time.perf_counter()
    check, read = fn(path)
    call_s = time.perf_counter() - t
    peak = (_status_kib("VmHWM") or 0) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"call_s": call_s, "peak_mib": (peak - base) / 1024, "check": check, "bytes_read": read}


def run(name: str, path: str, cache: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", name, path],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=3600,
        env={**os.environ, "POS_GEOMETRY_CACHE": cache},
    )
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _qk_bytes(path: Path) -> tuple[int, int]:
    """``(bytes of every attn_q/attn_k tensor, header bytes)`` of the file."""
    sys.path.insert(0, str(REPO))
    from pos_geometry.sources.byte_source import FileByteSource
    from pos_geometry.sources.gguf.header import read_header

    header = read_header(FileByteSource(path))
    qk = sum(t.n_bytes for n, t in header.tensors.items() if n.endswith(("attn_q.weight", "attn_k.weight")))
    return qk, header.data_offset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--worker", nargs=2, metavar=("METHOD", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if not GGUF.is_file():
        raise SystemExit(
            f"the real SmolLM2 GGUF is not at {GGUF} (../shared/data/real_models beside the checkout)"
        )
    results = {}
    cache = tempfile.mkdtemp(prefix="bench_gguf_atlas_")  # nothing remembered before the first run
    cold = run("pos_geometry", str(GGUF), cache)
    print("pos_geometry, first read", cold, flush=True)
    for name in ("pos_geometry", "transformers"):
        runs = [run(name, str(GGUF), cache) for _ in range(args.reps)]
        best = dict(min(runs, key=lambda r: r["call_s"]))
        best["peak_mib"] = min(r["peak_mib"] for r in runs)
        best["all_s"] = [round(r["call_s"], 3) for r in runs]
        results[name] = best
        print(name, best, flush=True)
    ours, theirs = results["pos_geometry"], results["transformers"]
    agree = abs(ours["check"] - theirs["check"]) <= 1e-6 * theirs["check"]
    qk, header = _qk_bytes(GGUF)
    command = "python benchmarks/bench_gguf_atlas.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    text = f"""## GGUF atlas: SmolLM2-135M-Instruct (Q4_1, 98 MB), pos_geometry vs transformers

Machine: {_machine()}. {_versions()}.
Command: `{command.strip()}` (each run a fresh process; best of {args.reps}; peak RSS above the RSS after imports; one empty `POS_GEOMETRY_CACHE` for the whole run).

| method | time (s) | runs (s) | peak RSS (MiB) |
|---|---|---|---|
| `rotary_atlas(path.gguf)` (30 layers × 9 heads × 32 planes), the model read before | {ours["call_s"]:.3f} | {ours["all_s"]} | {ours["peak_mib"]:.0f} |
| the same, first read (nothing remembered: transformers' config class, tensor processor and modeling code imported, the layout derived) | {cold["call_s"]:.3f} | | {cold["peak_mib"]:.0f} |
| `from_pretrained(gguf_file=...)` + q/k | {theirs["call_s"]:.2f} | {theirs["all_s"]} | {theirs["peak_mib"]:.0f} |

- **{theirs["call_s"] / ours["call_s"]:.1f}x less time, {theirs["peak_mib"] / max(ours["peak_mib"], 1):.1f}x less peak memory** (targets: 20x, 10x) for a model read before (what a first read derives from transformers is kept under `$POS_GEOMETRY_CACHE`: the built config, the tensor processor's effect, the attention layout); a first read: {theirs["call_s"] / cold["call_s"]:.1f}x and {theirs["peak_mib"] / max(cold["peak_mib"], 1):.1f}x.
- Bytes pos_geometry read: {ours["bytes_read"]:,} = q/k tensors {qk:,} + header {header:,} + {ours["bytes_read"] - qk - header:,} (target: at most 1 MiB over q/k + header; the header is fetched in doubling pieces).
- Both sums of ‖W_q‖² agree: {agree} ({ours["check"]:.6g} vs {theirs["check"]:.6g}).
"""
    print(text)
    update_section("bench_gguf_atlas", text)


if __name__ == "__main__":
    main()
