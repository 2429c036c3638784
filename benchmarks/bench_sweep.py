"""Sweep benchmark: every checkpoint of a 609-revision GPT-2-small run over a Hub with 20 ms latency.

Writes ``--revisions`` (default 609, the Stanford CRFM schedule) GPT-2-small-shaped checkpoints (GPT-2's
148 tensor names, the 1024×768 float32 positional table moving from a random init to the real table in
``../shared/data/real`` when present; the other tensors tiny, so the files are the table plus a real-size
header) and serves them from the loopback Hub server of ``tests/sources/hub_server.py`` as branches
``checkpoint-N``, every request delayed by ``--latency`` seconds. Then, each in a fresh subprocess with
empty caches (imports excluded from the time):

* ``sequential load``: ``for r in revisions: pos_geometry.load(repo, revision=r)`` (what a user writes today
  with pos_geometry alone; ``--sequential K`` times the first K and scales, said so in the table);
* ``sweep (norms)``: ``pos_geometry.sweep(repo, "all", analyses=["norms"])``: the fetch pipeline;
* ``sweep (cheap)``: ``analyses="cheap"`` (norms, top-3/top-10 PCA ratios, Procrustes drift);
* peak RSS of ``sweep (norms)`` over ``every:8``, ``every:4``, ``every:2`` and ``all`` (flat in N?).

Bytes are what the server wrote (headers included), against Σ tensor bytes; transformers/TransformerLens
would download each whole checkpoint (GPT-2 small's ``model.safetensors`` is 548,105,171 bytes on the Hub;
the CRFM replicas' ``pytorch_model.bin`` is of that size too).

Usage::

    python benchmarks/bench_sweep.py [--revisions 609] [--latency 0.02] [--workers 8] [--sequential 0]

The report replaces the ``bench_sweep`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "data" / "real" / "gpt2_small_wpe.npy"
REPO_ID = "bench/gpt2-small-run"
TABLE_BYTES = 1024 * 768 * 4
HF_CHECKPOINT_BYTES = 548_105_171  # openai-community/gpt2 model.safetensors


def _hub() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_bench_hub_server", REPO / "tests" / "sources" / "hub_server.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def write_run(folder: Path, n: int) -> list[str]:
    import numpy as np
    import torch
    from safetensors.torch import save_file

    from pos_geometry.registry.schedules import get_schedule

    steps = list(get_schedule("stanford-crfm").steps)[:n]
    real = (
        np.load(REAL)
        if REAL.is_file()
        else np.cumsum(np.random.default_rng(1).normal(size=(1024, 768)), 0) / 30
    )
    init = np.random.default_rng(0).normal(0.0, 0.02, real.shape)
    tiny = {f"transformer.h.{i}.{m}.{w}": torch.zeros(4) for i in range(12) for m in
            ("ln_1", "ln_2", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj") for w in ("weight", "bias")}  # fmt: skip
    tiny |= {"transformer.wte.weight": torch.zeros(4, 4), "transformer.ln_f.weight": torch.zeros(4),
             "transformer.ln_f.bias": torch.zeros(4)}  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(
        json.dumps({"model_type": "gpt2", "n_positions": 1024, "n_embd": 768})
    )
    for step in steps:
        t = np.log1p(step) / np.log1p(steps[-1])
        table = torch.from_numpy(((1 - t) * init + t * real).astype(np.float32))
        save_file(
            {"transformer.wpe.weight": table, **{k: v.clone() for k, v in tiny.items()}},
            str(folder / f"{step}.safetensors"),
        )
    return [f"checkpoint-{s}" for s in steps]


CHILD = r"""
import json, resource, sys, time
args = json.loads(sys.argv[1])
import pos_geometry as pg
from pos_geometry.sweeps import sweep
import pos_geometry.sweeps.run, pos_geometry.analysis.pca, scipy.spatial, pandas  # imports outside the timing
import pos_geometry.atlas.rotary, pos_geometry.sweeps.rotary
t0 = time.perf_counter()
if args["mode"] == "load":
    for r in args["revisions"]:
        pg.load(args["repo"], revision=r)
    n_ok = len(args["revisions"])
elif args["mode"] == "atlas":
    for r in args["revisions"]:
        pg.rotary_atlas(args["repo"], revision=r)
    n_ok = len(args["revisions"])
else:
    res = sweep(args["repo"], args["revisions"], analyses=args["analyses"], n_workers=args["workers"],
                store=args["store"], progress=False, null_method=args.get("null_method", "fast"),
                sequential=args.get("sequential", True))
    n_ok = len(res.ok)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "n_ok": n_ok, "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _serve(server: Any, repo: str, folder: Path, files: dict[str, str]) -> None:
    """Serve ``folder/<files[rev]>.safetensors`` (and ``folder/config.json``) as branch ``rev`` of ``repo``."""
    for rev, name in files.items():
        server.add_revision(
            repo,
            {"config.json": folder / "config.json", "model.safetensors": folder / f"{name}.safetensors"},
            refs=(rev,),
        )


def child(server: Any, work: Path, **args: Any) -> dict[str, Any]:
    cache = Path(tempfile.mkdtemp(dir=work, prefix="caches-"))
    env = {**os.environ, "HF_ENDPOINT": server.url, "HF_HOME": str(cache / "hf"), "HF_HUB_CACHE": str(cache / "hf" / "hub"),
           "POS_GEOMETRY_CACHE": str(cache / "pg"), "HF_HUB_DISABLE_XET": "1", "HF_HUB_OFFLINE": "0", "HF_TOKEN": ""}  # fmt: skip
    env.pop("POS_GEOMETRY_OFFLINE", None)
    args = {"store": str(cache / "store"), "workers": 8, "analyses": ["norms"], **args}
    server.clear_log()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["bytes_sent"] = server.bytes_sent
    row["requests"] = len(server.requests())
    shutil.rmtree(cache, ignore_errors=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--revisions", type=int, default=609)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument(
        "--sequential", type=int, default=0, help="time only the first K sequential loads (0: all)"
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    parser.add_argument(
        "--rotary", action="store_true", help="a Pythia-70m-shaped rotary run instead (bench_sweep_rotary)"
    )
    parser.add_argument(
        "--full-nulls", type=int, default=0, metavar="N",
        help="instead: N checkpoints with analyses='all' (every null, 199 surrogates), fast against exact "
        "nulls (bench_sweep_nulls)",
    )  # fmt: skip
    opts = parser.parse_args()
    if opts.rotary:
        return main_rotary(opts)
    if opts.full_nulls:
        return main_full_nulls(opts)
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_load import _machine, _versions

    work = Path(opts.workdir or tempfile.mkdtemp(prefix="bench_sweep-"))
    t0 = time.perf_counter()
    revisions = write_run(work / "ckpt", opts.revisions)
    print(f"wrote {len(revisions)} checkpoints in {time.perf_counter() - t0:.0f} s", flush=True)
    hub = _hub()
    rows: list[tuple[str, dict[str, Any], int]] = []
    with hub.HubServer() as server:
        _serve(server, REPO_ID, work / "ckpt", {rev: rev.split("-")[1] for rev in revisions})
        server.latency_s = opts.latency
        seq = revisions[: opts.sequential] if opts.sequential else revisions
        print(f"sequential load of {len(seq)} ...", flush=True)
        rows.append(
            ("sequential `load`", child(server, work, mode="load", revisions=seq, repo=REPO_ID), len(seq))
        )
        for label, analyses in (("sweep (norms)", ["norms"]), ("sweep (cheap)", "cheap")):
            print(f"{label} ...", flush=True)
            rows.append((label, child(server, work, mode="sweep", revisions="all", repo=REPO_ID,
                                      analyses=analyses, workers=opts.workers), len(revisions)))  # fmt: skip
        rss = []
        for rule in ("every:8", "every:4", "every:2", "all"):
            print(f"peak RSS, sweep {rule} ...", flush=True)
            r = child(server, work, mode="sweep", revisions=rule, repo=REPO_ID, workers=opts.workers)
            rss.append((rule, r))
    shutil.rmtree(work, ignore_errors=True)

    n = len(revisions)
    tensors = n * TABLE_BYTES
    seq_row = rows[0][1]
    seq_full = seq_row["wall_s"] * n / rows[0][2]
    scaled = rows[0][2] != n
    lines = [
        f"## Training-checkpoint sweep: {n} revisions over a loopback Hub with {opts.latency * 1000:.0f} ms latency per request",
        "",
        f"- Command: `python benchmarks/bench_sweep.py --revisions {opts.revisions} --latency {opts.latency} "
        f"--workers {opts.workers}" + (f" --sequential {opts.sequential}" if opts.sequential else "") + "`",
        f"- Machine: {_machine()}; load average {os.getloadavg()[0]:.2f} at the end. The 2 cores are shared with "
        "3 other engineers' jobs: timings are noisy, and the server (Python's http.server in the benchmark's "
        "process) competes with the client for them.",
        f"- Versions: {_versions()}",
        f"- Run: GPT-2-small-shaped checkpoints (148 tensor names, header {HEADER_NOTE}), the 1024×768 float32 table "
        "per checkpoint; fresh subprocess and empty caches per row, imports excluded; bytes = everything the "
        "server wrote (status lines, headers, bodies, API answers).",
        "",
        "| method | checkpoints | wall s | per checkpoint ms | requests | bytes sent | bytes / Σ tensors | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r, count in rows:
        lines.append(
            f"| {label} | {count} | {r['wall_s']:.1f} | {1000 * r['wall_s'] / count:.1f} | {r['requests']} | "
            f"{r['bytes_sent']:,} | {r['bytes_sent'] / (count * TABLE_BYTES):.4f} | {r['maxrss_mib']:.0f} |"
        )
    lines += ["", "Peak RSS of `sweep(..., analyses=['norms'])` against the number of revisions:", "",
              "| revisions | checkpoints | wall s | peak RSS MiB |", "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {rule} | {r['n_ok']} | {r['wall_s']:.1f} | {r['maxrss_mib']:.0f} |" for rule, r in rss]
    sweep_row = rows[1][1]
    speed = seq_full / sweep_row["wall_s"]
    ratio = sweep_row["bytes_sent"] / tensors
    lines += [
        "",
        f"- Speed-up of the sweep (norms) over the sequential loop: {speed:.1f}× "
        + (f"(the loop was timed on {rows[0][2]} checkpoints and scaled to {n}) " if scaled else "")
        + f"(target ≥ 8×: {'met' if speed >= 8 else 'NOT met'}).",
        f"- Bytes: {ratio:.4f} × the tensors (target ≤ 1.02: {'met' if ratio <= 1.02 else 'NOT met'}).",
        f"- Peak RSS from {rss[0][1]['n_ok']} to {rss[-1][1]['n_ok']} checkpoints: {rss[0][1]['maxrss_mib']:.0f} → "
        f"{rss[-1][1]['maxrss_mib']:.0f} MiB.",
        f"- transformers / TransformerLens load each whole checkpoint: {n} × {HF_CHECKPOINT_BYTES:,} bytes = "
        f"{n * HF_CHECKPOINT_BYTES / 1e9:.0f} GB for this sweep, {n * HF_CHECKPOINT_BYTES / sweep_row['bytes_sent']:.0f}× "
        "the bytes the sweep reads.",
    ]
    _report(lines, "bench_sweep", opts)


def main_full_nulls(opts: argparse.Namespace) -> None:
    """Checkpoints per minute of ``sweep(..., analyses="all")`` (PCA, drift, helix and periodicity with every
    null at 199 surrogates) with ``null_method="exact"`` (the nulls computed as
    whole tables, every surrogate drawn), ``"fast"`` with every surrogate drawn, and ``"fast"`` with the
    sequential helix nulls (the default), over the same loopback hub."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_load import _machine, _versions

    work = Path(opts.workdir or tempfile.mkdtemp(prefix="bench_sweep-"))
    revisions = write_run(work / "ckpt", opts.full_nulls)
    hub = _hub()
    rows = []
    with hub.HubServer() as server:
        _serve(server, REPO_ID, work / "ckpt", {rev: rev.split("-")[1] for rev in revisions})
        server.latency_s = opts.latency
        for method, sequential in (("exact", False), ("fast", False), ("fast", True)):
            label = f"{method}, {'sequential helix nulls' if sequential else 'every surrogate'}"
            print(f"sweep (all, {label}) ...", flush=True)
            rows.append((label, child(server, work, mode="sweep", revisions="all", repo=REPO_ID, analyses="all",
                                      workers=opts.workers, null_method=method, sequential=sequential)))  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    n = len(revisions)
    lines = [
        f'## Sweeps with every null: {n} GPT-2-small-shaped checkpoints, `analyses="all"`',
        "",
        f"- Command: `python benchmarks/bench_sweep.py --full-nulls {n} --latency {opts.latency} --workers {opts.workers}`",
        f"- Machine: {_machine()}; load average {os.getloadavg()[0]:.2f} at the end. Versions: {_versions()}",
        "- Each checkpoint: norms, top-10 PCA, Procrustes drift, the helix (three nulls) and periodicity (three "
        "nulls), 199 surrogates per null (a sequential helix null stops once 10 reach the table); fresh subprocess "
        "and empty caches per row, imports excluded. The tables move from a random init (step 0) to GPT-2's.",
        "",
        "| nulls | checkpoints | wall s | checkpoints per minute | peak RSS MiB |",
        "|---|---|---|---|---|",
    ]
    for method, r in rows:
        lines.append(
            f"| {method} | {r['n_ok']} | {r['wall_s']:.1f} | {60 * r['n_ok'] / r['wall_s']:.1f} | {r['maxrss_mib']:.0f} |"
        )
    speed = rows[0][1]["wall_s"] / rows[1][1]["wall_s"]
    seq = rows[1][1]["wall_s"] / rows[2][1]["wall_s"]
    lines += [
        "",
        f"- Fast nulls: {speed:.1f}× the checkpoints per minute of the exact ones; sequential helix nulls "
        f"{seq:.2f}× those of the fast ones with every surrogate.",
    ]
    _report(lines, "bench_sweep_nulls", opts)


def _report(lines: list[str], section: str, opts: argparse.Namespace) -> None:
    text = "\n".join(lines)
    print(text)
    if not opts.no_write:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from _results_md import update_section

        update_section(section, text)


HEADER_NOTE = "~15 KB, as GPT-2 small's"

# --- rotary: a Pythia-70m-shaped run ----------------------------------------------------------------
ROTARY_REPO_ID = "bench/pythia-70m-run"
PYTHIA_70M = {
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
    "hidden_size": 512, "initializer_range": 0.02, "intermediate_size": 2048, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 8,
    "num_hidden_layers": 6, "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
    "torch_dtype": "float16", "use_cache": True, "use_parallel_residual": True, "vocab_size": 50304,
}  # fmt: skip
QKV_BYTES = 6 * 3 * 512 * 512 * 2  # six fused query_key_value weights, float16
PYTHIA_70M_PARAMS = 70_426_624  # the model card's total; transformers downloads all of them (float16)


def write_rotary_run(folder: Path, n: int) -> list[str]:
    """``n`` Pythia-70m-shaped checkpoints (Pythia's tensor names; the six q/k/v weights at full size in
    float16, every other tensor tiny), the first ``n`` of Pythia's schedule."""
    import torch
    from safetensors.torch import save_file

    from pos_geometry.registry.schedules import get_schedule

    steps = list(get_schedule("pythia").steps)[:n]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(PYTHIA_70M))
    tiny = {"gpt_neox.embed_in.weight": torch.zeros(4, 4), "embed_out.weight": torch.zeros(4, 4),
            "gpt_neox.final_layer_norm.weight": torch.ones(4), "gpt_neox.final_layer_norm.bias": torch.zeros(4)}  # fmt: skip
    for i in range(6):
        for name in ("input_layernorm", "post_attention_layernorm"):
            tiny |= {f"gpt_neox.layers.{i}.{name}.{w}": torch.zeros(4) for w in ("weight", "bias")}
        for name in ("attention.dense", "mlp.dense_h_to_4h", "mlp.dense_4h_to_h"):
            tiny |= {f"gpt_neox.layers.{i}.{name}.{w}": torch.zeros(4) for w in ("weight", "bias")}
        tiny[f"gpt_neox.layers.{i}.attention.query_key_value.bias"] = torch.zeros(1536)
    gen = torch.Generator().manual_seed(0)
    for step in steps:
        qkv = {f"gpt_neox.layers.{i}.attention.query_key_value.weight": (torch.randn(1536, 512, generator=gen) * 0.02).half()
               for i in range(6)}  # fmt: skip
        save_file({**qkv, **{k: v.clone() for k, v in tiny.items()}}, str(folder / f"{step}.safetensors"))
    return [f"step{s}" for s in steps]


def main_rotary(opts: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_load import _machine, _versions

    work = Path(opts.workdir or tempfile.mkdtemp(prefix="bench_sweep_rotary-"))
    revisions = write_rotary_run(work / "ckpt", opts.revisions)
    hub = _hub()
    rows = []
    with hub.HubServer() as server:
        _serve(server, ROTARY_REPO_ID, work / "ckpt", {rev: rev[4:] for rev in revisions})
        server.latency_s = opts.latency
        print(f"sequential rotary_atlas of {len(revisions)} ...", flush=True)
        rows.append(
            (
                "sequential `rotary_atlas`",
                child(server, work, mode="atlas", revisions=revisions, repo=ROTARY_REPO_ID),
            )
        )
        print("sweep ...", flush=True)
        rows.append(("sweep (atlas, drift)", child(server, work, mode="sweep", revisions="all", repo=ROTARY_REPO_ID,
                                                   analyses="all", workers=opts.workers)))  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    n = len(revisions)
    tensors = n * QKV_BYTES
    hf_bytes = PYTHIA_70M_PARAMS * 2
    lines = [
        f"## Rotary training-checkpoint sweep: {n} Pythia-70m-shaped revisions over a loopback Hub with "
        f"{opts.latency * 1000:.0f} ms latency per request",
        "",
        f"- Command: `python benchmarks/bench_sweep.py --rotary --revisions {opts.revisions} --latency "
        f"{opts.latency} --workers {opts.workers}`",
        f"- Machine: {_machine()}; load average {os.getloadavg()[0]:.2f} at the end (the 2 cores are shared with "
        "other engineers' jobs; the server runs in the benchmark's process).",
        f"- Versions: {_versions()}",
        "- Run: Pythia-70m's config and tensor names; the six fused `query_key_value` weights at full size "
        f"(1536×512 float16, {QKV_BYTES:,} bytes per checkpoint), every other tensor tiny; the first {n} "
        "revisions of Pythia's schedule. Fresh subprocess and empty caches per row, imports excluded; bytes "
        "= everything the server wrote.",
        "",
        "| method | checkpoints | wall s | per checkpoint ms | requests | bytes sent | bytes / Σ q/k/v tensors | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {r['n_ok']} | {r['wall_s']:.1f} | {1000 * r['wall_s'] / n:.1f} | {r['requests']} | "
            f"{r['bytes_sent']:,} | {r['bytes_sent'] / tensors:.4f} | {r['maxrss_mib']:.0f} |"
        )
    speed = rows[0][1]["wall_s"] / rows[1][1]["wall_s"]
    lines += [
        "",
        f"- Speed-up of the sweep over the sequential `rotary_atlas` loop: {speed:.1f}×.",
        f"- transformers would download each whole checkpoint: Pythia-70m's {PYTHIA_70M_PARAMS:,} parameters "
        f"in float16 are {hf_bytes / 1e6:.0f} MB per checkpoint, {n * hf_bytes / 1e9:.1f} GB for these {n}, "
        f"{n * hf_bytes / rows[1][1]['bytes_sent']:.0f}× the bytes the sweep reads (computed from the model card's "
        "parameter count, not measured).",
    ]
    _report(lines, "bench_sweep_rotary", opts)


if __name__ == "__main__":
    main()
