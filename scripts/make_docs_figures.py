"""Regenerate the documentation's picture of GPT-2's helix (docs/figures/gpt2_helix.png) from the real table.

    .venv/bin/python scripts/make_docs_figures.py

Needs the real GPT-2 table (../shared/data/real beside the checkout, or the cache) and chromium (PNG export).
"""

from __future__ import annotations

from pathlib import Path

import pos_geometry as pg
from pos_geometry.plotting import plot_helix, save_figure

OUT = Path(__file__).resolve().parents[1] / "docs" / "figures" / "gpt2_helix.png"


def main() -> None:
    table = pg.load("gpt2")
    fit = pg.fit_helix(table, n_surrogates=19, alpha=0.05)  # the figure shows the fit, not its p-value
    figure = plot_helix(pg.pca(table, n_components=10), fit=fit)
    figure.update_layout(width=760, height=560)
    save_figure(figure, OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
