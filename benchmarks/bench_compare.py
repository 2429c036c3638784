"""What a comparison costs: ``pos-geometry compare`` of the three real models here, from nothing and again.

The models: GPT-2 small (its real table and attention weights in ``../shared/data/real``), GPT-1's table and
SmolLM2-135M-Instruct's GGUF (``../shared/data/real_models``), with fast cards on 2 × 64 tokens (the slow tier's
settings). Three runs, each ``pos-geometry --quiet compare ... --device cpu`` as a whole process with its own
empty results cache (``POS_GEOMETRY_CACHE``):

1. from nothing: every card is made;
2. the same command again: every card comes from the results cache;
3. a comparison of the three card folders run 1 wrote (each read from its ``card.json``).

``--screenshot PATH``: the top of the page in Debian's chromium, for the README and the guide.

Usage::

    python benchmarks/bench_compare.py [--screenshot docs/figures/compare_top.png] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from _results_md import update_section
from bench_card import screenshot
from bench_load import _machine, _versions

REPO = Path(__file__).resolve().parents[1]
MODELS = ["gpt2", "../shared/data/real/gpt1_openai_positions_embed.npy",
          "../shared/data/real_models/smollm2_135m_instruct_q4_1.gguf"]  # fmt: skip
CLI = str(Path(sys.executable).with_name("pos-geometry"))
OPTIONS = ["--fast", "--n-sequences", "2", "--seq-len", "64", "--device", "cpu"]


def _run(args: list[str], out: Path, cache: Path) -> float:
    start = time.perf_counter()
    subprocess.run([CLI, "--quiet", "compare", *args, "--out", str(out)], check=True, stdout=subprocess.DEVNULL,
                   cwd=REPO, env={**os.environ, "POS_GEOMETRY_CACHE": str(cache)})  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", type=Path, default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    missing = [m for m in MODELS[1:] if not (REPO / m).is_file()]
    if missing:
        sys.exit(f"the real models are not at {missing}")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        first = _run([*MODELS, *OPTIONS], root / "a", root / "cache")
        again = _run([*MODELS, *OPTIONS], root / "b", root / "cache")
        folders = sorted(str(p) for p in (root / "a" / "cards").iterdir() if not p.name.startswith("."))
        cards = _run(folders, root / "c", root / "empty_cache")
        origins = [m["origin"] for m in json.loads((root / "b" / "compare.json").read_text())["models"]]
        if args.screenshot is not None:
            screenshot(root / "a", args.screenshot, width=1200, height=900)
            print(f"wrote {args.screenshot}")
    rows = [
        f"| from nothing: three fast cards made, then the page | {first:.1f} s |",
        f"| the same command again (cards from the results cache: {', '.join(origins)}) | {again:.1f} s |",
        f"| the three card folders (read from their card.json) | {cards:.1f} s |",
    ]
    text = "\n".join([
        "## The comparison (`bench_compare.py`)", "",
        f"{date.today().isoformat()}, `python benchmarks/bench_compare.py`; {_machine()}; {_versions()}; 1-minute load "
        f"average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end. Wall time of `pos-geometry --quiet compare "
        f"gpt2 <GPT-1 table> <SmolLM2 GGUF> {' '.join(OPTIONS)} --out DIR` as a whole process (imports included).", "",
        "| comparison | wall |", "|---|---|", *rows,
    ])  # fmt: skip
    print(text)
    if not args.no_write:
        update_section("bench_compare", text)


if __name__ == "__main__":
    main()
