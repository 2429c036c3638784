"""The reproduction's look-back section: does a GPT-2 head "look back N tokens" by rotating the helix?

The helix post's comments propose that the helix lets a head attend a fixed number of tokens back
through a position-independent rotation of the positional subspace. :func:`lookback_section` measures
it per head on GPT-2 small's real attention weights (``../shared/data/real/gpt2_small_attention``,
else the caches; the hub only when ``online``) with
:func:`~pos_geometry.atlas.position_qk.position_qk_atlas` on the direct path, against the
null of the same heads with ``W_k``'s rows permuted (``permute_key_rows=True``), and returns a
:class:`~pos_geometry.reproduction.claims.Claim`, a figure and a markdown block with the per-head table.
Nothing is substituted when the weights are not here: the claim is ``"not measured"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from scipy.stats import fisher_exact

from pos_geometry.errors import MissingTensorError, NotCachedError
from pos_geometry.reproduction.claims import Claim
from pos_geometry.reproduction.rules import COMBINE_RULE, FAILS, HOLDS, UNDECIDABLE, combine

if TYPE_CHECKING:
    from pos_geometry.atlas.position_qk import PositionQKAtlas

__all__ = ["ATTENTION_FOLDER", "LookbackSection", "claim_lookback", "lookback_section"]

ATTENTION_FOLDER = "gpt2_small_attention"
"""The partial Hugging Face folder of GPT-2 small's ``wpe``, ``ln_1`` and ``c_attn`` in the real-data folder."""

ROTATION = 0.9  # a head "rotates" when its form on the table's top plane is at least this much a rotation
SHORT = 32  # a look-back of at most this many positions counts as "N tokens"
TOLERANCE = 0.25  # the rotation gives the look-back when |implied - peak| <= 25% of the peak + 1 position

STATEMENT = (
    "The helix lets a head 'look back N tokens': W_q·W_kᵀ acts on the positional subspace as a "
    "position-independent rotation, so the head's positional logit peaks a fixed offset back (the post's comments)."
)
CRITERION = (
    "per head of GPT-2 small (12 layers × 12 heads, direct path: the table through each layer's ln_1 and "
    "c_attn, biases in), against the same heads with W_k's rows permuted: (a) the position term's Toeplitz "
    "share (variance explained by the offset alone) beats the head's null in ≥ 75% of heads; (b) at least twice "
    f"as many heads as in the null have a form on the table's top principal plane that is ≥ {ROTATION} a rotation; "
    f"(c) for most rotating heads whose logits peak past offset 0, the rotation's implied look-back is within "
    f"{TOLERANCE:.0%} (+1 position) of the peak, more often than in the null (one-sided Fisher exact test, "
    "p < 0.05; when the null agrees about as often, (c) cannot be decided); (d) the same holds for most heads that "
    f"peak within {SHORT} positions. An implied look-back past the table's last position is not a look-back and "
    "never agrees. (a) and (b) are the premise: when either fails, not reproduced. Otherwise (c) and (d) decide: "
    f"{COMBINE_RULE}."
)


@dataclass(frozen=True)
class LookbackSection:
    """The look-back claim, the atlases behind it, its figure and its markdown.

    Attributes:
        claim: the :class:`Claim` (``"not measured"`` when the weights are not here).
        view, null: the trained heads' and the null's :class:`PositionQKAtlas` (None when not measured).
        where: where the weights were read, or the command that fetches them.
        figures: ``{stem: (plotly figure, caption)}``.
        markdown: the section's text with the per-head table.
    """

    claim: Claim
    view: PositionQKAtlas | None
    null: PositionQKAtlas | None
    where: str
    figures: Mapping[str, tuple[Any, str]] = field(default_factory=dict)
    markdown: str = ""


def _agrees(implied: torch.Tensor, peak: torch.Tensor, n_positions: int | None = None) -> torch.Tensor:
    """The implied look-back is within the tolerance of the peak (and, given ``n_positions``, inside the table)."""
    ok = (implied - peak).abs() <= TOLERANCE * peak + 1
    return ok if n_positions is None else ok & (implied <= n_positions - 1)


def _head_rows(view: PositionQKAtlas, null: PositionQKAtlas) -> list[dict[str, Any]]:
    n_heads = view.shape[1]
    implied, implied_null = view.implied_offset, null.implied_offset
    gives = _agrees(
        implied, view.peak_offset.double(), view.n_positions
    )  # the rotation's look-back is where the logits peak
    rows = []
    for i, layer in enumerate(view.layers):
        for h in range(n_heads):
            rows.append({
                "head": f"L{layer}H{h}", "layer": layer, "index": h,
                "toeplitz_share": float(view.toeplitz_share[i, h]), "toeplitz_null": float(null.toeplitz_share[i, h]),
                "rotation_fit": float(view.rotation_fit[i, h]), "rotation_fit_null": float(null.rotation_fit[i, h]),
                "rotation_angle": float(view.rotation_angle[i, h]), "implied_offset": float(implied[i, h]),
                "peak_offset": int(view.peak_offset[i, h]), "implied_offset_null": float(implied_null[i, h]),
                "peak_offset_null": int(null.peak_offset[i, h]), "logit_std": float(view.logit_std[i, h]),
                "rotation_gives_peak": bool(gives[i, h]),
            })  # fmt: skip
    return rows


def _rotating(result: PositionQKAtlas) -> tuple[int, int, int]:
    """``(rotating heads, of them peaking past 0, of those whose rotation gives the peak)``."""
    rotating = result.rotation_fit >= ROTATION
    peaked = rotating & (result.peak_offset >= 1)
    agree = peaked & _agrees(result.implied_offset, result.peak_offset.double(), result.n_positions)
    return int(rotating.sum()), int(peaked.sum()), int(agree.sum())


def claim_lookback(view: PositionQKAtlas | None, null: PositionQKAtlas | None) -> Claim:
    """Judge "look back N tokens" on a fitted direct-path atlas and its permuted-key null (module docstring)."""
    if view is None or null is None:
        return Claim(
            "look_back", STATEMENT, CRITERION,
            "GPT-2 small's attention weights (c_attn, ln_1) are not available here, so nothing was measured.",
            "not measured",
        )  # fmt: skip
    rows = _head_rows(view, null)
    n = len(rows)
    above = sum(r["toeplitz_share"] > r["toeplitz_null"] for r in rows)
    rot, peaked, agree = _rotating(view)
    rot_null, peaked_null, agree_null = _rotating(null)
    short = [r for r in rows if 1 <= r["peak_offset"] <= SHORT]
    short_ok = [r for r in short if r["rotation_gives_peak"]]
    a = HOLDS if above >= 0.75 * n else FAILS
    b = HOLDS if rot >= 2 * max(rot_null, 1) else FAILS
    c_p = (
        float(fisher_exact([[agree, peaked - agree], [agree_null, peaked_null - agree_null]], "greater")[1])
        if peaked and peaked_null
        else (0.0 if peaked else 1.0)
    )
    c = FAILS if not peaked or agree <= peaked / 2 else HOLDS if c_p < 0.05 else UNDECIDABLE
    d = UNDECIDABLE if not short else HOLDS if len(short_ok) > len(short) / 2 else FAILS
    verdict = "not reproduced" if FAILS in (a, b) else combine([c, d])
    beyond = [r for r in rows if r["implied_offset"] > view.n_positions - 1 and r["rotation_fit"] >= ROTATION]
    given = sorted(
        r["peak_offset"] for r in rows
        if r["rotation_fit"] >= ROTATION and r["peak_offset"] >= 1
        and r["rotation_gives_peak"]
    )  # fmt: skip
    period = 2 * torch.pi / abs(float(view.plane_step[0]))
    median = given[len(given) // 2] if given else float("nan")
    toe, toe_null = view.toeplitz_share.mean(), null.toeplitz_share.mean()
    words = ", ".join(
        f"{r['head']} peak {r['peak_offset']} vs implied {_implied(r, view.n_positions)} (rotation {r['rotation_fit']:.2f})"
        for r in short
    )
    measured = (
        f"the position term is {toe:.2f} a function of the offset on average against {toe_null:.2f} in the null "
        f"({above} of {n} heads above their null); {rot} heads' forms on the table's top plane are ≥ {ROTATION} a "
        f"rotation ({rot_null} in the null); for {agree} of the {peaked} rotating heads that peak past offset 0 the "
        f"rotation gives the peak within {TOLERANCE:.0%} ({agree_null} of {peaked_null} in the null), at look-backs of "
        f"{min(given, default=0)}–{max(given, default=0)} positions (median {median}, {median / period:.2f} of the "
        f"normed table's {period:.0f}-position turn at layer 0); of the {len(short)} heads peaking within "
        f"{SHORT} positions, {len(short_ok)} agree: {words or 'none'}. Parts: (a) {a}, (b) {b}, (c) {c} (Fisher p = "
        f"{c_p:.2g} against the null's rate), (d) {d}"
        + (
            f"; {len(beyond)} rotating head(s) imply a look-back past the {view.n_positions}-position table "
            f"({', '.join(r['head'] for r in beyond)}): not a look-back"
            if beyond
            else ""
        )
        + ". This is the direct path (the table read "
        "through each layer's norm): position composed through earlier layers, where previous-token heads get it, "
        "is not in it."
    )
    values = {
        "toeplitz_share_mean": float(toe), "toeplitz_null_mean": float(toe_null), "heads_above_null": above,
        "n_heads": n, "rotating_heads": rot, "rotating_heads_null": rot_null, "rotating_peaked": peaked,
        "rotation_gives_peak": agree, "rotating_peaked_null": peaked_null, "rotation_gives_peak_null": agree_null,
        "short_heads": [r["head"] for r in short], "short_heads_agreeing": [r["head"] for r in short_ok],
        "plane_step_layer0": float(view.plane_step[0]), "look_backs_given": given, "heads": rows,
        "parts": {"a": a, "b": b, "c": c, "d": d}, "agreement_vs_null_p": c_p, "n_positions": view.n_positions,
        "beyond_context": [r["head"] for r in beyond],
    }  # fmt: skip
    return Claim(
        "look_back", STATEMENT, CRITERION, measured, verdict, values, (view.provenance, null.provenance)
    )


def _read(
    data_dir: Path | None, online: bool, device: Any
) -> tuple[PositionQKAtlas | None, PositionQKAtlas | None, str]:
    from pos_geometry.atlas.position_qk import position_qk_atlas

    folder = data_dir / ATTENTION_FOLDER if data_dir is not None else None
    if folder is not None and (folder / "model.safetensors").is_file():
        source: Any = folder
        where = f"{ATTENTION_FOLDER}, ../shared/data/real (real GPT-2 small wpe, ln_1 and c_attn)"
        kwargs: dict[str, Any] = {"model_id": "gpt2"}
    else:
        source, kwargs = "gpt2", {"offline": not online}
        where = "gpt2 (hub)" if online else "gpt2 (local cache)"
    try:
        view = position_qk_atlas(source, device=device, **kwargs)
        null = position_qk_atlas(source, device=device, permute_key_rows=True, **kwargs)
    except (NotCachedError, MissingTensorError):
        return (
            None,
            None,
            "GPT-2 small's c_attn and ln_1 are not here; fetch with `pos-geometry atlas gpt2 --out atlas --online`",
        )
    return view, null, where


def _implied(row: dict[str, Any], n_positions: int) -> str:
    value = row["implied_offset"]
    return f"{value:.1f}" + (" (past the table: not a look-back)" if value > n_positions - 1 else "")


def _table(claim: Claim) -> list[str]:
    rows = claim.values["heads"]
    n_positions = int(claim.values["n_positions"])
    shown = sorted(rows, key=lambda r: -r["toeplitz_share"])[:8]
    shown += [r for r in rows if 1 <= r["peak_offset"] <= SHORT and r not in shown]
    lines = [
        "| head | Toeplitz share (null) | rotation fit (null) | implied look-back | logit peak |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['head']} | {r['toeplitz_share']:.3f} ({r['toeplitz_null']:.3f}) | {r['rotation_fit']:.3f} "
        f"({r['rotation_fit_null']:.3f}) | {_implied(r, n_positions)} | {r['peak_offset']} |"
        for r in shown
    ]
    return lines


def lookback_section(data_dir: Path | None, *, online: bool = False, device: Any = "cpu") -> LookbackSection:
    """The look-back claim on the real GPT-2 attention weights in ``data_dir`` (else the caches), with its
    figure and the per-head table (the 8 most offset-dependent heads and every short look-back; every
    head is in ``claim.values["heads"]`` and the report's JSON)."""
    view, null, where = _read(data_dir, online, device)
    claim = claim_lookback(view, null)
    lines = ["## Does a head look back N tokens? GPT-2 small's real attention weights", ""]
    if view is None or null is None:
        lines += [f"Not measured: {where}.", ""]
        return LookbackSection(claim, None, None, where, {}, "\n".join(lines))
    from pos_geometry.plotting.position_qk import plot_position_qk_lookback

    figures = {
        "gpt2_lookback": (
            plot_position_qk_lookback(view, null, rotation=ROTATION),
            "GPT-2 small, every head on the direct path against the same head with W_k's rows permuted: left, the "
            "share of its position logits that depends on the offset alone; right, for the heads whose form on the "
            f"table's top principal plane is ≥ {ROTATION} a rotation, the look-back that rotation implies against "
            "where the logits peak (log axes, offset + 1).",
        )
    }
    lines += [
        f"Read from {where}. Verdict: **{claim.verdict}**. {claim.measured[0].upper()}{claim.measured[1:]}",
        "",
        *_table(claim),
        "",
    ]
    return LookbackSection(claim, view, null, where, figures, "\n".join(lines))
