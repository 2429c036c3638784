"""Which heads of a rotary model lean on the fast planes beyond what planes used alike would give.

The rotary atlas's ``short_share`` (:class:`~pos_geometry.atlas.rotary_result.RotaryAtlas`) is the share of a
head's QK form held by the ``m`` planes of its layer that complete a cycle within the layer's span, of its ``N``
planes. "Uniform use" puts ``m/N`` there, but a head that prefers no plane is above ``m/N`` about half the time:
its plane strengths scatter (for isotropic random weights each plane's strength is a draw of its own). Counting
the heads above ``m/N`` counts half the heads of a random model.

So each head is tested. The null: the head's plane shares are exchangeable over its ``N`` planes (it does not
tell the planes apart by frequency; true of random weights with iid rows, whatever their distribution), so the
fast planes' share is the share of a random ``m`` of its ``N`` planes. The p-value is a permutation test's,
exact where there are at most ``B`` subsets of ``m`` planes (the share of each, against the fast planes'), and
otherwise by Monte Carlo: ``p = (1 + #{b : S_b ≥ S}) / (B + 1)`` over ``B`` random ``m``-subsets (one set per
layer, shared by its heads: each head's p is still a valid permutation p-value, and Holm holds under any
dependence). ``B`` is at least ``2·H/α`` for ``H`` tested heads, so the smallest Monte-Carlo p can pass Holm's
first step ``α/H``; an exact p is never below ``1/C(N, m)``, so a model with few planes (8 planes, 7 of them
fast: 8 subsets) can have no head that leans, and its p-values say why. Holm's correction over every tested
head at ``α`` gives the heads that lean on the fast planes.

A layer whose planes all turn within its span, or none does, has no contrast: its heads "do not apply" (NaN),
and the reason says so.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch

from pos_geometry._multiple import holm
from pos_geometry.analysis._results import Result
from pos_geometry.atlas.rotary_result import RotaryAtlas
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.provenance import Provenance

__all__ = ["PlanePreference", "plane_preference"]

ALPHA = 0.05
MIN_PERMUTATIONS = 999
_CHUNK = 4096  # random subsets drawn and compared at a time (bounds memory: heads × chunk)


@dataclass(frozen=True, eq=False, repr=False)
class PlanePreference(Result):
    """Each head's permutation test of its fast planes' share (module docstring). Like the package's other
    results: ``summary()``, ``to_dict()``/``to_json()`` (NaN p-values as null), a one-line ``repr``.

    Attributes:
        p_value: ``(n_layers, n_heads)`` float64, one-sided permutation p-values; NaN where the test does not
            apply (the layer's planes all turn within its span, or none do).
        leaning: ``(n_layers, n_heads)`` bool: the head's p passes Holm's correction over every tested head at
            ``alpha``.
        alpha: the family-wise level.
        n_permutations: ``B``, random plane subsets per layer (a layer with at most ``B`` subsets counts them all).
        min_p_value: the smallest p any tested head could get (``1/C(N, m)`` counted exactly, ``1/(B + 1)`` by
            Monte Carlo; NaN when no head was tested).
        reason: why some layers' heads were not tested ("" when every head was).
        provenance: the atlas's, with this test appended.
    """

    p_value: torch.Tensor
    leaning: torch.Tensor
    alpha: float
    n_permutations: int
    min_p_value: float
    reason: str
    provenance: Provenance

    @property
    def can_lean(self) -> bool:
        """Whether the smallest possible p passes Holm's first step (``α`` over the heads tested): with few
        planes it cannot, and then no head can be called leaning whatever its weights."""
        return bool(self.n_tested) and self.min_p_value * self.n_tested <= self.alpha

    @property
    def n_tested(self) -> int:
        """Heads with a p-value."""
        return int((~torch.isnan(self.p_value)).sum())

    @property
    def n_leaning(self) -> int:
        """Heads that lean on the fast planes after Holm's correction."""
        return int(self.leaning.sum())

    @property
    def method(self) -> str:
        """The test in words, for a sentence that reports it."""
        return (
            f"a permutation test of each head's shares over its planes ({self.n_permutations} random sets of as many "
            f"planes), Holm's correction over the {self.n_tested} heads tested at α = {self.alpha:g}"
        )

    def leaning_heads(self) -> list[tuple[int, int]]:
        """``[(layer index, head), ...]`` of the heads that lean, in order (indices into ``p_value``'s rows, not
        the model's layer numbers: see the atlas's ``layers``)."""
        return [tuple(v) for v in torch.nonzero(self.leaning).tolist()]

    def summary_rows(self) -> list[tuple[str, str]]:
        tested = self.n_tested
        rows = [
            ("heads tested", f"{tested} of {self.p_value.numel()}"),
            ("heads that lean on the fast planes", f"{self.n_leaning} (Holm, α = {self.alpha:g})"),
        ]
        if tested:
            rows.append(("smallest p", f"{float(torch.nan_to_num(self.p_value, nan=2.0).min()):.3g}"))
            rows.append(
                (
                    "smallest p possible",
                    f"{self.min_p_value:.3g}"
                    + ("" if self.can_lean else f": above α/{tested}, so no head can be called leaning"),
                )
            )
        heads = self.leaning_heads()
        if heads:
            shown = ", ".join(f"{layer}.{head}" for layer, head in heads[:12])
            rows.append(("leaning (layer index.head)", shown + (" …" if len(heads) > 12 else "")))
        rows.append(("test", self.method))
        if self.reason:
            rows.append(("not tested", self.reason))
        return rows


def plane_preference(
    atlas: RotaryAtlas, *, alpha: float = ALPHA, n_permutations: int | None = None, random_state: int = 0
) -> PlanePreference:
    """Test every head of ``atlas`` for a fast-plane share beyond exchangeable planes (module docstring).

    ``alpha``: the family-wise level of Holm's correction over the tested heads; ``n_permutations``: ``B``
    random subsets per layer (default: the larger of 999 and ``⌈2·H/α⌉``, ``H`` the heads tested);
    ``random_state``: seeds the subsets. Returns a :class:`PlanePreference`; nothing is recomputed from the
    weights (the atlas's ``qk_share`` ``(n_layers, n_heads, n_planes)`` is all it reads).
    """
    if not 0 < alpha < 1:
        raise InvalidArgumentError(
            f"alpha must lie strictly between 0 and 1; got {alpha!r}. Pass e.g. alpha=0.05."
        )
    share = atlas.qk_share.to(torch.float64).cpu()
    n_layers, n_heads, n_planes = share.shape
    critical = atlas.layer_critical.cpu()
    counts = critical.sum(-1)
    contrast = (counts > 0) & (counts < n_planes)
    tested = int(contrast.sum()) * n_heads
    if n_permutations is None:
        n_permutations = max(MIN_PERMUTATIONS, math.ceil(2 * tested / alpha))
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise InvalidArgumentError(
            f"n_permutations must be a positive integer; got {n_permutations!r}. Pass e.g. n_permutations=9999."
        )
    gen = torch.Generator().manual_seed(int(random_state))
    p = torch.full((n_layers, n_heads), math.nan, dtype=torch.float64)
    floors = []
    for layer in torch.nonzero(contrast).flatten().tolist():
        p[layer], smallest = _permutation_p(share[layer], critical[layer], n_permutations, gen)
        floors.append(smallest)
    leaning = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    flat = p.flatten()
    seen = ~torch.isnan(flat)
    if tested:
        adjusted = torch.tensor(holm(flat[seen].tolist()), dtype=torch.float64)
        leaning.view(-1)[seen] = adjusted <= alpha
    skipped = [atlas.layers[i] for i in range(n_layers) if not bool(contrast[i])]
    reason = (
        f"layers {', '.join(map(str, skipped))}: every plane turns within the span, or none does (nothing to "
        "compare the fast planes with)"
        if skipped
        else ""
    )
    step = f"plane_preference(alpha={alpha:g}, n_permutations={n_permutations}, random_state={int(random_state)})"
    floor = min(floors, default=math.nan)
    return PlanePreference(
        p, leaning, float(alpha), n_permutations, floor, reason, atlas.provenance.with_processing(step)
    )


def _permutation_p(
    share: torch.Tensor, fast: torch.Tensor, count: int, gen: torch.Generator
) -> tuple[torch.Tensor, float]:
    """``((n_heads,) p-values, the smallest p possible)`` of the fast planes' share of ``share``
    ``(n_heads, n_planes)``: over every subset of as many planes where there are at most ``count`` (exact), else
    over ``count`` random ones; NaN for a head whose shares are not all finite (a head with no QK form)."""
    n_planes = share.shape[-1]
    m = int(fast.sum())
    finite = torch.isfinite(share).all(-1)
    share = torch.where(finite[:, None], share, 0.0)
    observed = share[:, fast].sum(-1) - 1e-12  # ties count as reaching the observed share
    subsets = math.comb(n_planes, m)
    if subsets <= count:
        masks = torch.zeros(subsets, n_planes, dtype=torch.float64)
        for row, subset in enumerate(itertools.combinations(range(n_planes), m)):
            masks[row, list(subset)] = 1.0
        p, smallest = (share @ masks.T >= observed[:, None]).sum(-1).to(torch.float64) / subsets, 1 / subsets
    else:
        reached = torch.zeros(share.shape[0], dtype=torch.float64)
        left = count
        while left:
            b = min(_CHUNK, left)
            picks = torch.rand(b, n_planes, generator=gen).argsort(dim=-1)[:, :m]
            masks = torch.zeros(b, n_planes, dtype=torch.float64).scatter_(1, picks, 1.0)
            reached += (share @ masks.T >= observed[:, None]).sum(-1)
            left -= b
        p, smallest = (1.0 + reached) / (count + 1.0), 1 / (count + 1)
    return torch.where(finite, p, math.nan), smallest
