"""The card's per-head claim in the calibration matrix: heads that lean on a rotary model's fast planes.

``plane_preference`` (a permutation test per head over its planes, Holm over the heads) is run on rotary
atlases of random query/key weights, built from the weights' plane statistics exactly as ``rotary_atlas``
builds them (``plane_statistics``, ``usage_summaries``), without writing a checkpoint:

* nulls (no head prefers a plane): iid Gaussian weights (``weights-gauss``), Student-t with 3 degrees of freedom
  (``weights-t3``: heavy tails), and Gaussian rows each scaled by a log-normal factor (``weights-rowscale``: rows
  of unequal norm, as trained projections have);
* power (``lean-1.02``, ``lean-1.05``): three of the nine query heads of every layer have their fast planes' rows
  scaled by 1.02 or 1.05 (a 4% or 10% larger share of their QK form there).

Shapes: SmolLM2-135M's (30 layers × 9 query heads over 3 key heads, ``d_model`` 576, head dim 64, base 1e5,
context 8192: 21 of 32 planes fast) and Pythia-160m's rotary part (12 × 12, ``d_model`` 768, 25% of head dim 64
rotary: 8 planes, base 10000, context 2048: 6 fast, so 28 subsets and no p below 1/28; no head can pass Holm's
first step, and the row says so with its power of 0).

Counted per family: models with any head called leaning (the family-wise error, held to α + 2·SE at α = 0.05),
and heads called leaning among those that do not lean (and, on a power family, among those that do).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

HEAD_NULLS = ("weights-gauss", "weights-t3", "weights-rowscale")
HEAD_POWER = ("lean-1.02", "lean-1.05")
SHAPES = {
    "SmolLM2-135M": dict(
        layers=30, heads=9, kv=3, d_model=576, head_dim=64, rotary=64, base=1e5, context=8192
    ),
    "Pythia-160m": dict(
        layers=12, heads=12, kv=12, d_model=768, head_dim=64, rotary=16, base=1e4, context=2048
    ),
}
LEANING_HEADS = 3  # of each layer's query heads, on a power family


def _weights(family: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    w = torch.randn(shape, generator=gen, dtype=torch.float64)
    if family == "weights-t3":
        chi2 = (torch.randn((*shape, 3), generator=gen, dtype=torch.float64) ** 2).sum(-1)
        w = w / torch.sqrt(chi2 / 3)
    elif family == "weights-rowscale":
        w = w * torch.exp(0.5 * torch.randn((*shape[:-1], 1), generator=gen, dtype=torch.float64))
    return w


def head_atlas(family: str, shape: dict, gen: torch.Generator):
    """A :class:`~pos_geometry.atlas.rotary_result.RotaryAtlas` of one random model of ``family`` and ``shape``
    (``SHAPES``), and the ``(layers, heads)`` bool mask of the heads that lean by construction."""
    from pos_geometry.atlas.plane_statistics import plane_statistics, usage_summaries
    from pos_geometry.atlas.rotary_result import RotaryAtlas
    from pos_geometry.provenance import Provenance

    half = shape["rotary"] // 2
    planes = torch.stack([torch.arange(half), torch.arange(half) + half], 1)
    wavelengths = (
        2 * math.pi * shape["base"] ** (2 * torch.arange(half, dtype=torch.float64) / shape["rotary"])
    )
    critical = wavelengths <= shape["context"]
    lean = float(family.split("-")[1]) if family.startswith("lean-") else 1.0
    kv_heads = torch.arange(shape["heads"]) // (shape["heads"] // shape["kv"])
    shares = []
    for _ in range(shape["layers"]):
        q = _weights(family, (shape["heads"], shape["head_dim"], shape["d_model"]), gen)
        k = _weights(family, (shape["kv"], shape["head_dim"], shape["d_model"]), gen)
        q[:LEANING_HEADS, planes[critical].flatten()] *= lean
        shares.append(plane_statistics(q, k, planes, kv_heads=kv_heads, device="cpu")[2])
    share = torch.stack(shares)
    summary = usage_summaries(share, critical)
    zero = torch.zeros_like(share)
    atlas = RotaryAtlas(
        q_norm=zero, k_norm=zero, qk_share=share, q_pair_cosine=zero, k_pair_cosine=zero, wavelengths=wavelengths,
        critical=critical, short_share=summary["short_share"], layer_usage=summary["layer_usage"],
        layers=tuple(range(shape["layers"])), kv_heads=tuple(kv_heads.tolist()), context_length=shape["context"],
        critical_dimension=2 * int(critical.sum()), fold_norm=False, pairing="rotate_half",
        provenance=Provenance(f"random {family}", "rotary", "bench_calibration"),
    )  # fmt: skip
    truth = torch.zeros(share.shape[:2], dtype=torch.bool)
    if lean != 1.0:
        truth[:, :LEANING_HEADS] = True
    return atlas, truth


def run_heads(models: int, families: list[str], seed: int) -> list[str]:
    """The report's lines for the per-head claim: one row per family and shape."""
    from pos_geometry.atlas.plane_preference import plane_preference

    alpha = 0.05
    bound = alpha + 2 * math.sqrt(alpha * (1 - alpha) / models)
    lines = [
        "",
        f"The card's per-head claim, heads that lean on the fast rotary planes (`plane_preference`: a permutation "
        f"test per head, Holm over the heads at α = {alpha}), on {models} random models per row. A model with any "
        f"head called leaning that does not lean is a family-wise error, held to α + 2·SE = {bound:.3f}.",
        "",
        "| family | shape | models | heads tested | smallest possible p | models with a false head | false heads "
        "| leaning heads found (power) | 'above uniform' (the count the card gave before) | s/model |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    failures = []
    for family in families:
        for name, shape in SHAPES.items():
            gen = torch.Generator().manual_seed(seed)
            t0 = time.perf_counter()
            wrong_models = wrong = true_found = true_total = 0
            above = []
            for i in range(models):
                atlas, truth = head_atlas(family, shape, gen)
                found = plane_preference(atlas, random_state=seed + i)
                false = found.leaning & ~truth
                wrong_models += bool(false.any())
                wrong += int(false.sum())
                true_found += int((found.leaning & truth).sum())
                true_total += int(truth.sum())
                uniform = float(atlas.layer_critical.sum(-1).double().mean()) / atlas.shape[2]
                above.append(float((atlas.short_share > uniform).double().mean()))
            heads = found.n_tested
            fast = int(atlas.layer_critical[0].sum())
            subsets = math.comb(atlas.shape[2], fast)
            floor = 1 / subsets if subsets <= found.n_permutations else 1 / (found.n_permutations + 1)
            ok = wrong_models / models <= bound
            if not ok:
                failures.append(f"{family} {name}: {wrong_models}/{models} > {bound:.3f}")
            power = f"{true_found}/{true_total} ▲" if true_total else "—"
            lines.append(
                f"| {family} | {name} ({atlas.shape[2]} planes, {fast} fast) | {models} | {heads} | {floor:.2g} "
                f"| {wrong_models}/{models} {'✓' if ok else '✗'} | {wrong}/{models * heads - true_total} | {power} "
                f"| {np.mean(above):.0%} of heads | {(time.perf_counter() - t0) / models:.2f} |"
            )
    lines += ["", "Per-head claim out of bounds: " + ("; ".join(failures) if failures else "none") + "."]
    return lines
