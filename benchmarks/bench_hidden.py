"""Hidden-state positions benchmark: ``hidden_positions`` vs the naive path that keeps every residual.

Builds a GPT-2-small-shaped model with random weights (12 layers, d_model 768, 12 heads, vocab
50257, 1024 positions) in a temporary folder with a small WordLevel tokenizer (TransformerLens
needs one to boot; token ids are given directly), draws ``--n-sequences`` random contexts of
``--seq-len`` tokens (seed 0), and runs, each in a fresh subprocess:

* ``pos_geometry``: ``hidden_positions(model, tokens, batch_size=B)``: all 13 layers, streamed
  running sums, every per-layer metric;
* ``transformer_lens``: TransformerLens 4.x ``TransformerBridge.boot_transformers(folder)``, then
  ``run_with_cache`` batch by batch keeping every ``hook_resid_pre`` (and the last
  ``hook_resid_post``) as numpy, then the same decomposition in numpy on the kept
  ``(n_sequences, seq_len, d_model)`` arrays (position and context means, shares, top-3 ratio).

Both paths run the same batch size: ``--batch-size``, by default pos_geometry's own default for the
sequence length (2048 tokens per pass on a CPU). Per run: wall time of the call (model loading and
imports excluded), tokens/s, and peak RSS above the RSS after loading (VmHWM, reset with
/proc/self/clear_refs). Both paths' layer-6 top-3 ratio (``Σ_{i≤3} λ_i / Σ λ_i`` of ``posᵀ pos``,
float64 eigenvalues; pos_geometry's ``top_k_ratio`` metric) must agree to 1e-4 relative: the two
forwards differ only in float32 rounding (transformers' SDPA attention vs the bridge's), about 1e-6
on hidden states of order 1. ``--memory-sweep N1,N2,...`` also runs pos_geometry alone at each number of contexts
(``--sweep-seq-len`` tokens each) to show that its peak does not grow with it.

Usage::

    python benchmarks/bench_hidden.py [--n-sequences 64] [--seq-len 1024] [--batch-size B]
                                      [--memory-sweep 64,512 --sweep-seq-len 256]

The report replaces the ``bench_hidden`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results_md import update_section
from bench_load import _machine, _reset_peak, _status_kib, _versions

REPO = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def _build(folder: Path) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    config = transformers.GPT2Config(bos_token_id=0, eos_token_id=0)  # GPT-2 small's shape
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    vocab = {"<|endoftext|>": 0, **{f"w{i}": i + 1 for i in range(255)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special = "<|endoftext|>"
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=special, eos_token=special, unk_token=special
    ).save_pretrained(folder)


def _tokens(n: int, seq_len: int):
    import numpy as np

    return np.random.default_rng(0).integers(0, 50257, size=(n, seq_len))


def _top3(pos) -> float:
    import numpy as np

    values = np.linalg.eigvalsh(pos.T @ pos)[::-1]
    return float(values[:3].sum() / values.sum())


def _worker(method: str, folder: str, n: int, seq_len: int, batch_size: int) -> dict:
    import numpy as np
    import torch

    torch.set_grad_enabled(False)
    tokens = _tokens(n, seq_len)
    if method == "pos_geometry":
        import transformers

        import pos_geometry as pg

        model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
        pg.hidden_positions(model, tokens[:2, :16], batch_size=2)  # warm up (lazy imports)
        rss = _status_kib("VmRSS")
        _reset_peak()
        start, cpu = time.perf_counter(), time.process_time()
        res = pg.hidden_positions(model, tokens, batch_size=batch_size, device="cpu")
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        top3 = float(res.metric("top_k_ratio")[res.layers.index(6)])
    elif method == "transformer_lens":
        from transformer_lens.model_bridge import TransformerBridge

        bridge = TransformerBridge.boot_transformers(folder, device="cpu")
        n_layers = bridge.cfg.n_layers
        names = [f"blocks.{i}.hook_resid_pre" for i in range(n_layers)] + [
            f"blocks.{n_layers - 1}.hook_resid_post"
        ]
        bridge.run_with_cache(torch.from_numpy(tokens[:2, :16]), names_filter=names)  # warm up
        rss = _status_kib("VmRSS")
        _reset_peak()
        start, cpu = time.perf_counter(), time.process_time()
        kept: dict[str, list] = {name: [] for name in names}
        for i in range(0, n, batch_size):
            _, cache = bridge.run_with_cache(torch.from_numpy(tokens[i : i + batch_size]), names_filter=names)
            for name in names:
                kept[name].append(cache[name].numpy())
            del cache
        for name in names:  # the decomposition, in numpy, on every kept residual
            h = np.concatenate(kept.pop(name)).astype(np.float64)
            mu = h.mean(axis=(0, 1))
            pos = h.mean(axis=0) - mu
            ctx = h.mean(axis=1) - mu
            total = np.square(h - mu).sum()
            shares = (n * np.square(pos).sum() / total, seq_len * np.square(ctx).sum() / total)
            if name == "blocks.6.hook_resid_pre":
                top3 = _top3(pos)
            del h, shares
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    else:
        raise SystemExit(f"unknown method {method}")
    peak = _status_kib("VmHWM")
    return {
        "method": method, "n": n, "seq_len": seq_len, "time_s": elapsed,
        "tokens_per_s": n * seq_len / elapsed, "cpu_s": cpu, "peak_mib": (peak - rss) / 1024, "rss_mib": rss / 1024, "top3": top3,
    }  # fmt: skip


def _run(method: str, folder: Path, n: int, seq_len: int, batch_size: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", method, "--folder", str(folder)]
    cmd += ["--n-sequences", str(n), "--seq-len", str(seq_len), "--batch-size", str(batch_size)]
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{os.environ.get('PYTHONPATH', '')}", "TQDM_DISABLE": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{method} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(result), file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-sequences", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--memory-sweep", default="")
    parser.add_argument("--sweep-seq-len", type=int, default=256)
    parser.add_argument("--worker", default=None)
    parser.add_argument("--folder", default=None)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker, args.folder, args.n_sequences, args.seq_len, args.batch_size)))
        return
    if args.batch_size is None:  # pos_geometry's default for this length, for both paths
        from pos_geometry.hidden.run import TOKENS_PER_BATCH

        args.batch_size = max(1, TOKENS_PER_BATCH["cpu"] // args.seq_len)
    sweep_batch = max(1, TOKENS_PER_BATCH["cpu"] // args.sweep_seq_len)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _build(folder)
        ours = _run("pos_geometry", folder, args.n_sequences, args.seq_len, args.batch_size)
        naive = _run("transformer_lens", folder, args.n_sequences, args.seq_len, args.batch_size)
        sweep = [
            _run("pos_geometry", folder, int(n), args.sweep_seq_len, sweep_batch)
            for n in args.memory_sweep.split(",")
            if n.strip()
        ]
    load_after = os.getloadavg()
    command = "python benchmarks/bench_hidden.py " + shlex.join(sys.argv[1:])
    speed = ours["tokens_per_s"] / naive["tokens_per_s"]
    cpu_speed = naive["cpu_s"] / ours["cpu_s"]
    memory = naive["peak_mib"] / max(ours["peak_mib"], 1e-9)
    rel = abs(ours["top3"] - naive["top3"]) / abs(naive["top3"])
    lines = [
        "## hidden_positions on a GPT-2-small-shaped model vs TransformerLens run_with_cache (CPU)",
        "",
        f"- Command: `{command.strip()}`",
        f"- Machine: {_machine()}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        "(2 cores shared with other engineers: timings are noisy)",
        f"- Versions: {_versions()}",
        f"- Model: GPT-2 small's shape (12 layers, d_model 768, 12 heads, vocab 50257), random weights, float32; "
        f"{args.n_sequences} random contexts × {args.seq_len} tokens, batch size {args.batch_size} (both paths), all 13 layers.",
        "- pos_geometry: `hidden_positions(model, tokens)` (streamed sums, every metric). Naive: TransformerLens "
        "`TransformerBridge.boot_transformers(folder)` + `run_with_cache` keeping every `hook_resid_pre` and the last "
        "`hook_resid_post` (`names_filter`) as float32 numpy arrays, then per layer in numpy: float64 copy, μ, "
        "pos[t], ctx[c], the shares and the layer-6 top-3 ratio. Same batch size for both. Fresh subprocess each; "
        "time excludes loading; peak = VmHWM above the RSS after loading.",
        "",
        "| method | contexts × tokens | time s | tokens/s | CPU s (all threads) | peak RSS above loaded MiB "
        "| layer-6 top-3 ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in [ours, naive, *sweep]:
        lines.append(
            f"| {r['method']} | {r['n']} × {r['seq_len']} | {r['time_s']:.1f} | {r['tokens_per_s']:.0f} | {r['cpu_s']:.0f} | "
            f"{r['peak_mib']:.0f} | {r['top3']:.5f} |"
        )
    lines += [
        "",
        f"- Throughput: {speed:.2f}× the naive path in wall time (target ≥ 2×: {'met' if speed >= 2 else 'NOT met'}), "
        f"{cpu_speed:.2f}× in CPU time (less sensitive to the other engineers' load, which changes between runs); "
        f"peak memory: 1/{memory:.1f} of it (target ≤ 1/10: {'met' if memory >= 10 else 'NOT met'}); "
        f"layer-6 top-3 ratios agree to 1e-4 relative: {rel < 1e-4} (relative difference {rel:.1e}).",
    ]
    if sweep:
        peaks = ", ".join(f"{r['n']}: {r['peak_mib']:.0f} MiB" for r in sweep)
        lines.append(
            f"- Memory sweep, pos_geometry alone ({args.sweep_seq_len} tokens per context, batch {sweep_batch}): "
            f"{peaks} peak RSS above loaded."
        )
    update_section("bench_hidden", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
