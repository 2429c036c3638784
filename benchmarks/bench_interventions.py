"""Interventions on the real SmolLM2-135M (GGUF, Q4_1): what removing rotation planes, interpolating positions
and swapping the pairing cost in next-token loss.

Reads ``../shared/data/real_models/smollm2_135m_instruct_q4_1.gguf`` (never copied) and a corpus of English
prose that every Debian machine has: license texts of ``/usr/share/common-licenses`` (:data:`TEXTS`, in that
order, joined by blank lines; texts that repeat another's wording, GPL-2 beside LGPL-2.1 or GFDL-1.2 beside
1.3, are left out), tokenised with the GGUF's own tokenizer. Two parts:

* ``planes``: contexts of ``--seq-len`` tokens (default 512, the first ``--n-sequences``); Δloss of the
  pairing swap, of stilling the 1, 2, 4, 8, 16 slowest or fastest of the 32 rotation planes (p-RoPE), and
  of position interpolation ×2 (frequencies halved) inside the trained context;
* ``long``: two contexts of ``--long-seq-len`` tokens (default 16384, twice SmolLM2's 8192): Δloss of
  position interpolation ×2 there, where the unedited model runs past its training context.

Δloss is edited minus unedited mean loss (nats per predicted token), with a 95% bootstrap interval over
contexts. The figure of the ``planes`` part goes to ``--figure`` (PNG when a browser is there, else HTML).

Usage::

    python benchmarks/bench_interventions.py [--skip-long | --only-long] [--json numbers.json]
        [--figure docs/figures/smollm2_interventions.png]

The report replaces the ``bench_interventions`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _results_md import update_section
from bench_load import _machine, _versions

REPO = Path(__file__).resolve().parents[1]
GGUF = REPO.parent / "shared" / "data" / "real_models" / "smollm2_135m_instruct_q4_1.gguf"
LICENSES = Path("/usr/share/common-licenses")
TEXTS = ("GPL-3", "MPL-2.0", "Apache-2.0", "LGPL-2.1", "GFDL-1.3", "MPL-1.1", "Artistic", "CC0-1.0", "GPL-1")


def _tokens(gguf: Path):
    import numpy as np
    import transformers

    text = "\n\n".join((LICENSES / name).read_text() for name in TEXTS)
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    return np.asarray(tokenizer(text)["input_ids"], dtype=np.int64), len(text)


def _contexts(ids, seq_len: int, n: int | None):
    count = ids.size // seq_len if n is None else min(n, ids.size // seq_len)
    if count < 2:
        raise SystemExit(f"the corpus has {ids.size} tokens: fewer than 2 contexts of {seq_len}")
    return ids[: count * seq_len].reshape(count, seq_len)


def _rows(sweep) -> list[dict]:
    return [
        {"edit": r.edit, "parameter": r.parameter, "base_loss": r.base_loss, "edited_loss": r.edited_loss,
         "delta": r.delta, "low": r.delta_interval[0], "high": r.delta_interval[1]}
        for r in sweep.results
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, default=GGUF)
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--n-sequences", type=int, default=32)
    parser.add_argument("--long-seq-len", type=int, default=16384)
    parser.add_argument("--skip-long", action="store_true")
    parser.add_argument("--only-long", action="store_true")
    parser.add_argument("--figure", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()

    import pos_geometry as pg
    from pos_geometry.hidden.model import open_model
    from pos_geometry.interventions import parse_edits
    from pos_geometry.plotting import plot_intervention_sweep, save_figure

    ids, n_chars = _tokens(args.gguf)
    start = time.perf_counter()
    model = open_model(args.gguf, device="cpu", head=True).module
    out: dict = {"tokens": int(ids.size), "characters": n_chars, "load_s": time.perf_counter() - start}
    if args.json is not None and args.json.is_file():
        out = {**json.loads(args.json.read_text()), **out}  # keep the part not rerun
    if not args.only_long:
        edits = parse_edits(["swap", "planes-slow:1,2,4,8,16", "planes-fast:1,2,4,8,16", "scale:2"])
        short = _contexts(ids, args.seq_len, args.n_sequences)
        start = time.perf_counter()
        planes = pg.intervene_sweep(model, short, edits, device="auto")
        out |= {"planes": _rows(planes), "planes_shape": list(short.shape), "planes_s": time.perf_counter() - start,
                "planes_base": planes.base_loss, "planes_passes": len(edits) + 1}  # fmt: skip
        _save(args, out)
        if args.figure is not None:
            title = f"SmolLM2-135M (GGUF Q4_1): Δloss of positional edits, {short.shape[0]} × {short.shape[1]} tokens"
            fig = plot_intervention_sweep(planes, title=title)
            try:
                save_figure(fig, args.figure, format=args.figure.suffix.lstrip("."))
            except pg.ExportError:
                save_figure(fig, args.figure.with_suffix(".html"), format="html")
    if not args.skip_long:
        long = _contexts(ids, args.long_seq_len, 2)
        start = time.perf_counter()
        far = pg.intervene_sweep(model, long, parse_edits(["scale:2"]), device="auto", batch_size=1)
        r, half = far.results[0], 8192  # SmolLM2's training context
        halves = {
            name: [float(v[: half - 1].mean()), float(v[half - 1 :].mean())]
            for name, v in (
                ("unedited", r.base_loss_by_position),
                ("interpolated", r.edited_loss_by_position),
            )
        }
        out |= {"long": _rows(far), "long_shape": list(long.shape), "long_s": time.perf_counter() - start,
                "long_halves": halves}  # fmt: skip
        _save(args, out)
    text = _report(out)
    update_section("bench_interventions", text)
    print(text)


def _save(args: argparse.Namespace, out: dict) -> None:
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1))


def _report(out: dict) -> str:
    lines = [
        "## Interventions on the real SmolLM2-135M (GGUF Q4_1)",
        "",
        f"Command: `python benchmarks/bench_interventions.py`. Machine: {_machine()}. {_versions()}.",
        "",
        f"Corpus: {', '.join(TEXTS)} from `/usr/share/common-licenses` ({out['characters']} characters, "
        f"{out['tokens']} tokens of the GGUF's tokenizer). Δloss: edited minus unedited mean next-token loss, "
        "nats per token, 95% bootstrap interval over contexts.",
    ]
    if "planes" in out:
        n, t = out["planes_shape"]
        lines += [
            "",
            f"Rotation planes, pairing and interpolation, {n} contexts × {t} tokens (base loss "
            f"{out['planes_base']:.3f}; {out['planes_s']:.0f} s for {out['planes_passes']} passes):",
            "",
            "| edit | Δloss | 95% interval |",
            "|---|---|---|",
            *[
                f"| {r['edit']} | {r['delta']:+.3f} | [{r['low']:+.3f}, {r['high']:+.3f}] |"
                for r in out["planes"]
            ],
        ]
    if "long" in out:
        r = out["long"][0]
        n, t = out["long_shape"]
        lines += [
            "",
            f"Position interpolation ×2 at twice the training context: {n} contexts × {t} tokens (SmolLM2 was "
            f"trained to 8192): loss {r['base_loss']:.3f} unedited, {r['edited_loss']:.3f} interpolated, Δloss "
            f"{r['delta']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}] ({out['long_s']:.0f} s).",
        ]
        if "long_halves" in out:
            (a, b), (c, d) = out["long_halves"]["unedited"], out["long_halves"]["interpolated"]
            lines[-1] += (
                f" Mean loss at positions 0-8190 / 8191-16382: unedited {a:.3f} / {b:.3f}, interpolated "
                f"{c:.3f} / {d:.3f}."
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
