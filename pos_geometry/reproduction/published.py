"""Published numbers beside the ones measured in this run (``report.md``: "Published vs measured").

The published values come from ``data/reference/`` (:mod:`pos_geometry.reference`); each is measured
here on the same rows and with the same definition, or reported as not measured with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pos_geometry.analysis.pca import PCAResult, pca
from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.reference import PublishedValue, published_value

__all__ = ["Comparison", "published_vs_measured"]


@dataclass(frozen=True)
class Comparison:
    """One published number and what this run measured for it (``measured`` None: not measured, see ``how``)."""

    quantity: str
    published: PublishedValue
    measured: float | None
    how: str

    def to_dict(self) -> dict:
        p = self.published
        return {
            "quantity": self.quantity,
            "source": p.source,
            "published": p.value,
            "approximate": p.approximate,
            "where": p.where,
            "verified": p.verified,
            "measured": self.measured,
            "how": self.how,
        }


def published_vs_measured(
    gpt2: PositionalEmbedding | None, fits: Sequence[PCAResult] = ()
) -> tuple[Comparison, ...]:
    """Each published GPT-2 number in ``data/reference`` beside the one measured on ``gpt2`` (None: not measured).

    * the post's top-3 variance share: exact PCA over the rows it names (all 1024), centred over positions;
    * Song & Zhong's layer-0 positional stable rank ``Σ s_j² / s_1²``: of the rows they used (1..511),
      centred over positions (their ``pos`` at layer 0 is that table up to sampling noise);
    * their ScreeNOT rank: the rank the authors' own package (``screenot``, Donoho, Gavish & Romanov;
      the optional extra ``pos-geometry[screenot]``) returns for the same centred rows with Song & Zhong's
      call ``adaptiveHardThresholding(pos, k=20, strategy="i")``; not measured when it is not installed
      (ScreeNOT is not re-implemented here).
    Reference files that are absent (an installed package without its checkout) give no rows.
    ``fits``: exact PCAs of ``gpt2`` already made (centred over positions); one whose window is the one
    needed is reused instead of decomposing the table again.
    """

    def fitted(window: tuple[int, int]) -> PCAResult:
        for res in fits:
            if tuple(res.window) == tuple(window) and res.center and res.solver == "exact":
                return res
        return pca(gpt2, 3, window=window, solver="exact")

    missing = "not measured: GPT-2 small's table is not available here"
    out = []
    top3 = published_value("helix_post", "gpt2_top3_variance_ratio")
    if top3 is not None:
        window = top3.rows or (0, 1024)
        if gpt2 is None:
            out.append(Comparison("GPT-2 small: top-3 variance share", top3, None, missing))
        else:
            ratio = fitted(window).explained_variance_ratio_[:3].sum()
            how = f"exact PCA of rows {window[0]}..{window[1] - 1}, centred over positions"
            out.append(Comparison("GPT-2 small: top-3 variance share", top3, float(ratio), how))
    srank = published_value("song_zhong_2023", "gpt2_pos_stable_rank_layer0")
    if srank is not None:
        window = srank.rows or (1, 512)
        if gpt2 is None:
            out.append(Comparison("GPT-2 small: positional stable rank", srank, None, missing))
        else:
            value = fitted(window).stable_rank_
            how = f"‖A‖_F²/‖A‖₂² of rows {window[0]}..{window[1] - 1}, centred over positions"
            out.append(Comparison("GPT-2 small: positional stable rank", srank, float(value), how))
    screenot = published_value("song_zhong_2023", "gpt2_pos_screenot_rank_layer0")
    if screenot is not None:
        out.append(_screenot(gpt2, screenot, missing))
    return tuple(out)


SCREENOT_K, SCREENOT_STRATEGY = 20, "i"
"""Song & Zhong's call: ``adaptiveHardThresholding(pos, k=20, strategy='i')`` (src/utils/metrics.py)."""


def _screenot(gpt2: PositionalEmbedding | None, published: PublishedValue, missing: str) -> Comparison:
    """The ScreeNOT rank of the centred rows Song & Zhong used, from the authors' package."""
    quantity = "GPT-2 small: ScreeNOT rank"
    if gpt2 is None:
        return Comparison(quantity, published, None, missing)
    try:
        from screenot import adaptiveHardThresholding
    except ImportError:
        how = (
            "not measured: the authors' ScreeNOT package is not installed (pip install 'pos-geometry[screenot]'); "
            "it is not re-implemented here"
        )
        return Comparison(quantity, published, None, how)
    start, stop = published.rows or (1, 512)
    rows = gpt2.matrix[start:stop].detach().to("cpu", torch.float64).numpy()
    _, threshold, rank = adaptiveHardThresholding(
        rows - rows.mean(axis=0), SCREENOT_K, strategy=SCREENOT_STRATEGY
    )
    how = (
        f"screenot.adaptiveHardThresholding(rows {start}..{stop - 1} centred over positions, k={SCREENOT_K}, "
        f"strategy='{SCREENOT_STRATEGY}') (the authors' package): threshold {float(threshold):.4g}"
    )
    return Comparison(quantity, published, float(rank), how)
