"""Loading benchmark: how fast, how much memory and how many bytes it takes to get GPT-2's positional matrix.

Builds checkpoints with random weights and the real shapes of ``gpt2`` (124M) and ``gpt2-xl``
(1.5B) -- the HF ``GPT2LMHeadModel`` key names and shapes, fp32 ``model.safetensors`` written by
streaming, ``config.json`` and a tiny local tokenizer -- then gets ``(1024, d_model)`` from each,
every run in a fresh subprocess (so peak RSS and caches are per run), four ways:

* ``pos_geometry``: ``pos_geometry.load(dir)``;
* ``transformers``: ``GPT2LMHeadModel.from_pretrained(dir).transformer.wpe.weight``;
* ``transformer_lens``: ``TransformerBridge.boot_transformers(dir, device="cpu").W_pos``;
* ``safetensors`` (reference floor): ``safe_open(file).get_tensor("transformer.wpe.weight")``.

Per run: import time; time to the matrix from the start of the call; peak RSS above the
RSS after imports (VmHWM after resetting it through ``/proc/self/clear_refs``, falling back to
``ru_maxrss``); ``rchar`` / ``read_bytes`` deltas from ``/proc/self/io`` (``rchar`` counts
``read`` calls, not pages faulted in through ``mmap``; ``read_bytes`` counts what came from
the disk, so it is only meaningful with a cold cache) and major page faults. Unless
``--cache warm``, the page cache is dropped before every run (needs root).

Imports are not part of the call: every module a method would import lazily inside the call
(TransformerLens imports ``transformers.models.gpt2.modeling_gpt2`` and a dozen others on its
first ``boot_transformers``) is imported before the baseline (:data:`WARM_IMPORTS`), and the
modules still imported during the call are counted and reported, so no method is charged for
an import in its time or memory.

Usage::

    python benchmarks/bench_load.py [--sizes gpt2,gpt2-xl] [--workdir benchmarks/_work] [--keep]

The report replaces the ``bench_load`` section of ``benchmarks/RESULTS.md`` (``--output`` to
write a standalone file instead).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import importlib
import json
import math
import os
import platform
import resource
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _results_md import update_section

REPO = Path(__file__).resolve().parents[1]
POS_KEY = "transformer.wpe.weight"
SIZES: dict[str, dict[str, int]] = {
    "gpt2": {"n_embd": 768, "n_layer": 12, "n_head": 12},
    "gpt2-xl": {"n_embd": 1600, "n_layer": 48, "n_head": 25},
}
N_POSITIONS = 1024
METHODS = ("pos_geometry", "safetensors", "transformers", "transformer_lens")
HEAVY = ("transformers", "transformer_lens")
CHUNK = 1 << 24  # elements generated and written at a time (64 MiB of fp32)
MiB = 1 << 20
#: Modules a method imports lazily during its first call (found by diffing ``sys.modules`` around
#: the call), imported with the method so that the call's time and memory exclude them.
WARM_IMPORTS: dict[str, tuple[str, ...]] = {
    "transformer_lens": (
        "transformer_lens.model_bridge.sources.transformers_driver",
        "transformer_lens.utilities.architectures",
        "transformers.audio_utils",
        "transformers.feature_extraction_utils",
        "transformers.generation.candidate_generator",
        "transformers.generation.stopping_criteria",
        "transformers.generation.utils",
        "transformers.masking_utils",
        "transformers.modeling_layers",
        "transformers.models.gpt2.configuration_gpt2",
        "transformers.models.gpt2.modeling_gpt2",
        "transformers.processing_utils",
        "transformers.utils.type_validators",
        "transformers.video_utils",
    ),
}


# ---------------------------------------------------------------- checkpoint building


def _config(size: str) -> Any:
    from transformers import GPT2Config

    return GPT2Config(
        n_positions=N_POSITIONS, vocab_size=50257, architectures=["GPT2LMHeadModel"], **SIZES[size]
    )


def checkpoint_layout(size: str) -> list[tuple[str, tuple[int, ...]]]:
    """``(key, shape)`` of what ``save_pretrained`` stores for this size, from a meta-device model.

    Tied parameters (``lm_head.weight`` is ``transformer.wte.weight``) are stored once, and
    keys are in the order the ``safetensors`` library writes same-dtype tensors (by name).
    """
    import torch
    from transformers import GPT2LMHeadModel

    with torch.device("meta"):
        model = GPT2LMHeadModel(_config(size))
    stored = dict(model.named_parameters())  # drops the tied duplicate
    params_all = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    buffers = {k: v for k, v in model.state_dict().items() if k not in params_all}
    return sorted((k, tuple(v.shape)) for k, v in {**stored, **buffers}.items())


def safetensors_header(
    layout: list[tuple[str, tuple[int, ...]]], code: str = "F32", itemsize: int = 4
) -> bytes:
    """The 8-byte length and the (8-byte aligned) JSON header of a safetensors file holding ``layout``
    in one dtype, tensors stored in that order."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for key, shape in layout:
        nbytes = math.prod(shape) * itemsize
        header[key] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


def write_safetensors(path: Path, layout: list[tuple[str, tuple[int, ...]]], seed: int = 0) -> None:
    """Write fp32 N(0, 0.02²) tensors with ``layout`` as a ``.safetensors`` file, one chunk at a time.

    ``safetensors.torch.save_file`` needs every tensor in memory plus a serialized copy;
    the format (8-byte little-endian header length, JSON header, raw data) is simple enough
    to stream so that at most one ``CHUNK`` is held. The result is checked with ``safe_open``.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    tmp = path.with_suffix(".partial")
    with open(tmp, "wb") as fh:
        fh.write(safetensors_header(layout))
        for _, shape in layout:
            remaining = math.prod(shape)
            while remaining:
                n = min(remaining, CHUNK)
                fh.write(memoryview((torch.randn(n, generator=gen) * 0.02).numpy()))
                remaining -= n
    tmp.replace(path)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        got = sorted((k, tuple(f.get_slice(k).get_shape())) for k in f.keys())  # noqa: SIM118
    if got != layout:
        raise RuntimeError(f"{path} does not hold the layout it was written with")


def _write_tokenizer(folder: Path) -> None:
    """A WordLevel tokenizer over a few made-up words: enough for TransformerLens to boot offline."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, **{f"w{i}": i + 1 for i in range(255)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    s = "<|endoftext|>"
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=s, eos_token=s, unk_token=s).save_pretrained(
        folder
    )


def build_checkpoint(size: str, workdir: Path) -> Path:
    """``workdir/size/`` with config.json, tokenizer and model.safetensors; reused when complete."""
    folder = workdir / size
    layout = checkpoint_layout(size)
    stamp = hashlib.sha256(json.dumps(layout).encode()).hexdigest()
    marker = folder / ".complete"
    if marker.is_file() and marker.read_text() == stamp:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    _config(size).save_pretrained(folder)
    _write_tokenizer(folder)
    n = sum(math.prod(s) for _, s in layout)
    print(
        f"writing {folder / 'model.safetensors'}: {len(layout)} tensors, {n / 1e6:.0f}M params, "
        f"{n * 4 / 2**30:.2f} GiB ...",
        flush=True,
    )
    t = time.perf_counter()
    write_safetensors(folder / "model.safetensors", layout)
    print(f"  done in {time.perf_counter() - t:.1f} s", flush=True)
    marker.write_text(stamp)
    return folder


# ---------------------------------------------------------------- one measured run (subprocess)


def _proc_io() -> dict[str, int]:
    with open("/proc/self/io") as fh:
        return {k: int(v) for k, v in (line.split(":") for line in fh)}


def _status_kib(field: str) -> int | None:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def _import(method: str) -> Any:
    """Import what ``method`` needs (and :data:`WARM_IMPORTS`) and return the function ``dir -> matrix``."""
    for name in WARM_IMPORTS.get(method, ()):
        # another version may not have it; the call then imports what it needs, and that is reported
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if method == "pos_geometry":
        import pos_geometry

        load = getattr(pos_geometry, "load", None)
        if load is None:
            from pos_geometry.loading import load
        return lambda d: load(d).matrix
    if method == "safetensors":
        import torch  # noqa: F401  (safe_open(framework="pt") would import it inside the call)
        from safetensors import safe_open

        def read(d: Path) -> Any:
            with safe_open(str(d / "model.safetensors"), framework="pt") as f:
                return f.get_tensor(POS_KEY)

        return read
    if method == "transformers":
        from transformers import GPT2LMHeadModel

        return lambda d: GPT2LMHeadModel.from_pretrained(d).transformer.wpe.weight.detach()
    if method == "transformer_lens":
        from transformer_lens.model_bridge import TransformerBridge

        return lambda d: TransformerBridge.boot_transformers(str(d), device="cpu").W_pos.detach()
    raise ValueError(method)


def worker(method: str, folder: Path) -> dict[str, Any]:
    """Import, reset the peak, get the matrix; everything this run measured, as a dict."""
    t0 = time.perf_counter()
    fn = _import(method)
    import_s = time.perf_counter() - t0
    gc.collect()
    modules0 = set(sys.modules)
    hwm_reset = _reset_peak()
    base_kib = _status_kib("VmRSS") or 0
    file0_kib = _status_kib("RssFile") or 0
    maxrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    io0, flt0 = _proc_io(), resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    t1 = time.perf_counter()
    matrix = fn(folder)
    call_s = time.perf_counter() - t1
    io1, ru = _proc_io(), resource.getrusage(resource.RUSAGE_SELF)
    peak_kib = (_status_kib("VmHWM") or 0) if hwm_reset else ru.ru_maxrss
    file_kib = (_status_kib("RssFile") or 0) - file0_kib
    imported = sorted(set(sys.modules) - modules0)
    m = matrix.detach().float().contiguous().numpy()
    return {
        "import_s": import_s,
        "call_s": call_s,
        "peak_above_base_mib": (peak_kib - base_kib) / 1024,
        "peak_source": "VmHWM" if hwm_reset else f"ru_maxrss (peak before the call: {maxrss0} KiB)",
        "file_rss_after_mib": file_kib / 1024,
        "imported_in_call": imported,
        "rchar_mib": (io1["rchar"] - io0["rchar"]) / MiB,
        "read_bytes_mib": (io1["read_bytes"] - io0["read_bytes"]) / MiB,
        "major_faults": ru.ru_majflt - flt0,
        "shape": list(m.shape),
        "tensor_mib": m.nbytes / MiB,
        "sha256": hashlib.sha256(m.tobytes()).hexdigest(),
    }


# ---------------------------------------------------------------- driver


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3")
    except OSError:
        return False
    return True


def run_one(method: str, folder: Path, cold: bool) -> dict[str, Any]:
    if cold and not drop_caches():
        raise RuntimeError("cannot drop the page cache (needs root); rerun with --cache warm")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    cmd = [sys.executable, __file__, "--worker", method, str(folder)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{method} on {folder} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")), "?")
    ram = next((int(ln.split()[1]) for ln in meminfo if ln.startswith("MemTotal")), 0)
    return f"{model}, {os.cpu_count()} cores, {ram / 2**20:.1f} GiB RAM, Linux {platform.release()}"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"Python {platform.python_version()}"]
    for pkg in ("pos-geometry", "torch", "safetensors", "transformers", "transformer-lens"):
        try:
            parts.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            parts.append(f"{pkg} (not installed)")
    return ", ".join(parts)


def _fmt(values: list[float], digits: int = 3) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def table(results: dict[str, dict[str, list[dict[str, Any]]]]) -> tuple[str, list[str]]:
    """The markdown table (medians, with min–max over repeats) and the target checks."""
    head = (
        "| checkpoint | method | runs | import s | time to matrix s | vs TransformerLens | "
        "peak RSS above baseline MiB | × tensor | file-backed RSS after MiB | rchar MiB | read_bytes MiB | "
        "major faults | modules imported in call |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows, checks = [], []
    for size, by_method in results.items():
        tl = by_method.get("transformer_lens")
        tl_s = statistics.median(r["call_s"] for r in tl) if tl else None
        for method, runs in by_method.items():
            call = statistics.median(r["call_s"] for r in runs)
            peak = statistics.median(r["peak_above_base_mib"] for r in runs)
            tensor = runs[0]["tensor_mib"]
            speed = f"{tl_s / call:,.0f}×" if tl_s else "–"
            rows.append(
                f"| {size} ({runs[0]['shape'][0]}×{runs[0]['shape'][1]}, {tensor:.2f} MiB) | {method} | "
                f"{len(runs)} | {_fmt([r['import_s'] for r in runs], 2)} | {_fmt([r['call_s'] for r in runs])} | "
                f"{speed} | {_fmt([r['peak_above_base_mib'] for r in runs], 1)} | {peak / tensor:.1f} | "
                f"{statistics.median(r['file_rss_after_mib'] for r in runs):,.1f} | "
                f"{statistics.median(r['rchar_mib'] for r in runs):,.1f} | "
                f"{statistics.median(r['read_bytes_mib'] for r in runs):,.1f} | "
                f"{statistics.median(r['major_faults'] for r in runs):,.0f} | "
                f"{max(len(r['imported_in_call']) for r in runs)} |"
            )
            if method == "pos_geometry" and tl_s:
                fast, small = tl_s / call >= 50, peak <= 3 * tensor
                checks.append(
                    f"{size}: pos_geometry.load is {tl_s / call:,.0f}× faster than TransformerLens "
                    f"(target ≥ 50×: {'met' if fast else 'NOT met'}); its peak is {peak:.1f} MiB = "
                    f"{peak / tensor:.1f}× the tensor (target ≤ 3×: {'met' if small else 'NOT met'})"
                )
    return head + "\n".join(rows) + "\n", checks


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="gpt2,gpt2-xl", help="comma-separated: " + ",".join(SIZES))
    p.add_argument("--workdir", type=Path, default=REPO / "benchmarks" / "_work")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--repeats", type=int, default=5, help="runs of pos_geometry and safetensors (median)")
    p.add_argument("--heavy-repeats", type=int, default=2, help="runs of transformers and TransformerLens")
    p.add_argument(
        "--cache", choices=("cold", "warm"), default="cold", help="drop the page cache before runs"
    )
    p.add_argument(
        "--output",
        type=Path,
        default=None,
        help="write the report to this file (default: its section of benchmarks/RESULTS.md)",
    )
    p.add_argument("--keep", action="store_true", help="keep the generated checkpoints")
    p.add_argument("--worker", nargs=2, metavar=("METHOD", "DIR"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], Path(args.worker[1]))))
        return

    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [s for s in sizes if s not in SIZES] + [m for m in methods if m not in METHODS]
    if bad:
        p.error(f"unknown size/method {bad}; sizes: {list(SIZES)}, methods: {list(METHODS)}")
    cold = args.cache == "cold"
    if cold and not drop_caches():
        print("cannot drop the page cache (not root?): measuring with a warm cache", flush=True)
        cold = False
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO), *sys.argv[1:]])
    load_at_start = Path("/proc/loadavg").read_text().split()[0]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    folders = []
    try:
        for size in sizes:
            folder = build_checkpoint(size, args.workdir)
            folders.append(folder)
            results[size] = {}
            for method in methods:
                n = args.heavy_repeats if method in HEAVY else args.repeats
                runs = []
                for i in range(n):
                    r = run_one(method, folder, cold)
                    print(
                        f"{size:8s} {method:17s} run {i + 1}/{n}: {r['call_s']:.4f} s, "
                        f"peak +{r['peak_above_base_mib']:.1f} MiB, rchar {r['rchar_mib']:.1f} MiB, "
                        f"read_bytes {r['read_bytes_mib']:.1f} MiB",
                        flush=True,
                    )
                    runs.append(r)
                results[size][method] = runs
            digests = {m: {r["sha256"] for r in rs} for m, rs in results[size].items()}
            if len(set().union(*digests.values())) != 1:
                raise RuntimeError(f"{size}: the methods returned different matrices: {digests}")
    finally:
        if not args.keep:
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)

    md, checks = table(results)
    cache_note = (
        "cold page cache (`sync; echo 3 > /proc/sys/vm/drop_caches` before every run)"
        if cold
        else "warm page cache (the checkpoint is in memory, so read_bytes is ~0)"
    )
    load_at_end = Path("/proc/loadavg").read_text().split()[0]
    report = (
        "## Loading the positional matrix: pos_geometry vs transformers vs TransformerLens (CPU)\n\n"
        f"- Command: `{command}`\n- Machine: {_machine()}\n- Versions: {_versions()}\n"
        f"- Cache: {cache_note}\n"
        "- Checkpoints: random fp32 weights with the real shapes and HF key names of each model "
        "(`model.safetensors`, `config.json`, a tiny local tokenizer).\n"
        "- Each run is a fresh subprocess. *time to matrix*: wall time of the call, after imports "
        "(import time is its own column; modules a method imports lazily inside its call are imported "
        "beforehand, and *modules imported in call* counts any left). *peak RSS above baseline*: VmHWM "
        "(reset after imports) minus the RSS after imports, so it includes the one-time cost of the first "
        "call in a process (e.g. libtorch code pages faulted in by the first tensor operations); file pages "
        "mapped by mmap count as resident. *file-backed RSS after*: the RssFile growth over the call "
        "(mmap'd checkpoint pages, shared-library code). *rchar*: bytes passed through read() calls "
        "(mmap'd reads do not appear); *read_bytes*: bytes fetched from the disk. "
        "Cells: median (min–max). All methods returned bit-identical matrices.\n"
        "- `transformers` and `safetensors` keep fp32 CPU weights memory-mapped from the file: pages "
        "count toward RSS only once touched, so their peak RSS is far below the model's size even "
        "though `read_bytes` shows the kernel reading most of the file ahead.\n"
        f"- 1-minute load average: {load_at_start} when the run started, {load_at_end} when it ended "
        f"(on {os.cpu_count()} cores); timings on a busy machine are noisy.\n\n"
        + md
        + "\n"
        + "\n".join(f"- {c}" for c in checks)
        + "\n"
    )
    print("\n" + report)
    if args.output is None:
        written = update_section("bench_load", report)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(report)
        written = args.output
    print(f"written to {written}")


if __name__ == "__main__":
    main()
