"""The positional card's cost on the real models: ``pos-geometry card`` as a whole process (imports included).

Targets: SmolLM2-135M-Instruct (GGUF Q4_1, ``../shared/data/real_models``) with the default corpus ≤ 3 minutes
on two quiet cores, ≤ 60 s with ``--fast``; GPT-2 small (``../shared/data/real``) ≤ 60 s. Each card is made
``--repeats`` times (median and range), and each section's seconds are read from its ``card.json``. With
``--screenshot PATH`` the top of the SmolLM2 card is captured in Debian's chromium (Playwright) for the README.

Usage::

    python benchmarks/bench_card.py [--repeats 1] [--screenshot docs/figures/card_smollm2_top.png] [--no-write]

The report replaces the ``bench_card`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from _results_md import update_section
from bench_load import _machine, _versions

REPO = Path(__file__).resolve().parents[1]
# relative to REPO (the commands run there), as the README writes it
SMOLLM2 = Path("../shared/data/real_models/smollm2_135m_instruct_q4_1.gguf")
CLI = str(Path(sys.executable).with_name("pos-geometry"))
CASES = (  # name, arguments, target seconds
    ("SmolLM2-135M (GGUF Q4_1), default corpus", [str(SMOLLM2)], 180.0),
    ("SmolLM2-135M (GGUF Q4_1), --fast", [str(SMOLLM2), "--fast"], 60.0),
    ("GPT-2 small (real table and attention weights)", ["gpt2"], 60.0),
)


def _run(args: list[str], out: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    subprocess.run([CLI, "--quiet", "card", *args, "--out", str(out), "--device", "cpu"], check=True,
                   stdout=subprocess.DEVNULL, cwd=REPO)  # fmt: skip
    seconds = time.perf_counter() - start
    return seconds, json.loads((out / "card.json").read_text())


def screenshot(folder: Path, path: Path, width: int = 1100, height: int = 760) -> None:
    """The top of ``folder/index.html`` as a PNG, in Debian's chromium."""
    from playwright.sync_api import sync_playwright

    from pos_geometry.plotting.export import find_browser

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(find_browser()), headless=True)
        page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
        page.goto((folder / "index.html").as_uri(), wait_until="load")
        page.screenshot(path=str(path))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--screenshot", type=Path, default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if not (REPO / SMOLLM2).is_file():
        sys.exit(f"the real SmolLM2 GGUF is not at {SMOLLM2}")
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, case, target) in enumerate(CASES):
            times, card = [], None
            for r in range(args.repeats):
                seconds, card = _run(case, Path(tmp) / f"{i}_{r}")
                times.append(seconds)
                print(f"{name}: {seconds:.1f} s", flush=True)
            sections = ", ".join(f"{s['key']} {s['seconds']:.1f}" for s in card["sections"])
            med = statistics.median(times)
            spread = f" ({min(times):.1f}–{max(times):.1f})" if len(times) > 1 else ""
            rows.append(
                f"| {name} | {med:.1f} s{spread} | ≤ {target:.0f} s | {'met' if med <= target else 'not met'} | {sections} |"
            )
        if args.screenshot is not None:
            screenshot(Path(tmp) / "0_0", args.screenshot)
            print(f"wrote {args.screenshot}")
    text = "\n".join([
        "## The positional card (`bench_card.py`)", "",
        f"{date.today().isoformat()}, `python benchmarks/bench_card.py --repeats {args.repeats}`; {_machine()}; {_versions()}; "
        f"1-minute load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end. Wall time of "
        "`pos-geometry --quiet card MODEL --out DIR --device cpu` as a whole process; the sections' seconds are "
        "the page's own cost line (the residual stream's includes the one model pass it shares with attention by "
        "offset).", "",
        "| card | wall | target | verdict | seconds per section |", "|---|---|---|---|---|", *rows,
    ])  # fmt: skip
    print(text)
    if not args.no_write:
        update_section("bench_card", text)


if __name__ == "__main__":
    main()
