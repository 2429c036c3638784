"""The card's rotary section: one :func:`~pos_geometry.rotary_atlas` per rotating layer type, in words.

The verdict gives the share of each head's QK form held by the planes that complete a cycle within the
layer's span (the short-wavelength planes) beside the share those planes would hold if a head used every
plane alike (their count over the number of planes), and says which heads lean on the fast planes: each
head's permutation test over its planes, Holm over the heads (:func:`~pos_geometry.atlas.plane_preference.plane_preference`;
a head of random weights is above the uniform share half the time, so the count above it says nothing).
"""

from __future__ import annotations

from typing import Any

import torch

from pos_geometry.cards.identity import Subject
from pos_geometry.cards.result import Section, Verdict, not_run, ran

__all__ = ["rotary_section"]

KEY = "rotary"
N_LOCAL = 3  # heads named as leaning most on the fast planes (a share of QK weight, not attention locality)


def _type_verdicts(label: str, atlas: Any) -> tuple[list[Verdict], dict[str, Any]]:
    from pos_geometry.atlas.plane_preference import plane_preference

    _, n_heads, n_planes = atlas.shape
    short = atlas.short_share
    uniform = float(atlas.layer_critical.sum(-1).double().mean()) / n_planes
    mean = float(short.mean())
    lean = plane_preference(atlas)
    where = f" ({label} layers)" if label else ""
    n_crit = int(atlas.critical.sum())
    flat = torch.argsort(short.flatten(), descending=True)[:N_LOCAL].tolist()
    local = [(atlas.layers[i // n_heads], i % n_heads, float(short.flatten()[i])) for i in flat]
    usage = atlas.layer_usage.mean(dim=0)
    top = torch.argsort(usage, descending=True)[:3].tolist()
    verdicts = [
        Verdict(
            f"rotary{where}: the {n_crit} of {n_planes} planes that turn at least once within the span carry "
            f"{mean:.2f} of the QK form (uniform use of the planes: {uniform:.2f}; range over the heads, not an "
            f"interval: {float(short.min()):.2f}–{float(short.max()):.2f}); "
            + _leaning_words(lean, short.numel()),
            interval=(float(short.min()), float(short.max())),
            **_leaning_decision(lean),
        ),
        Verdict(
            f"rotary{where}: heads whose QK weights lean most on the fast planes (a share of the query/key form, "
            "read from the weights; how local their attention is, is in the attention section) "
            + ", ".join(f"L{layer} H{head} ({share:.2f})" for layer, head, share in local)
            + "; most used planes "
            + ", ".join(f"{i} (wavelength {float(atlas.wavelengths[i]):.4g})" for i in top)
        ),
    ]
    values = {
        "layer_type": label or None, "short_share_mean": mean, "uniform_share": uniform,
        "heads_leaning": lean.n_leaning, "heads_tested": lean.n_tested, "lean_p_values": lean.p_value,
        "lean_alpha": lean.alpha, "lean_permutations": lean.n_permutations, "lean_min_p": lean.min_p_value,
        "n_heads": int(short.numel()),
        "critical_planes": n_crit, "n_planes": n_planes,
        "layer_short_share": atlas.layer_short_share, "most_local_heads": local, "most_used_planes": top,
        "wavelengths": atlas.wavelengths, "plane_usage": usage, "span": max(atlas.spans, default=atlas.context_length),
        "context_length": atlas.context_length,
    }  # fmt: skip
    return verdicts, values


def _leaning_words(lean: Any, n_heads: int) -> str:
    if not lean.n_tested:
        return f"whether a head leans on them cannot be tested: {lean.reason}"
    untested = f"; {n_heads - lean.n_tested} heads not tested: {lean.reason}" if lean.reason else ""
    floor = (
        ""
        if lean.can_lean
        else f"; with so few planes no head can be called leaning: its smallest possible p, {lean.min_p_value:.2g}, "
        f"is above Holm's first step, {lean.alpha:g}/{lean.n_tested}"
    )
    return (
        f"{lean.n_leaning} of {lean.n_tested} heads lean on them beyond what planes used alike would give "
        f"({lean.method}{untested}{floor})"
    )


def _leaning_decision(lean: Any) -> dict[str, Any]:
    """The verdict's status and p: the family's, Holm's smallest adjusted p (some head leans, or none does)."""
    null = "each head's plane shares exchangeable over its planes (no preference by frequency)"
    if not lean.n_tested:
        return {"status": "does not apply", "null": null}
    p = lean.p_value[~lean.p_value.isnan()]
    family = min(1.0, float(p.min()) * lean.n_tested)
    floor = min(1.0, lean.min_p_value * lean.n_tested)
    status = "beats its null" if lean.n_leaning else "not significant"
    return {"status": status, "null": null, "p_value": family, "min_p_value": floor}


def rotary_section(s: Subject, *, device: Any = "auto") -> tuple[Section, dict[str, Any]]:
    """The rotary section and its atlases ``{layer type or "": RotaryAtlas}`` (empty when it does not apply)."""
    if not s.is_rotary:
        why = {
            "learned table": "the model's positions come from a learned table: no query/key plane turns with position",
            "table file": "a bare table has no attention weights to read",
        }.get(s.kind, "the model does not rotate its queries and keys")
        return not_run(KEY, "does not apply", why), {}
    if s.unavailable:
        return not_run(KEY, "not available", f"the model's weights cannot be read here: {s.unavailable}"), {}
    from pos_geometry.atlas.rotary import rotary_atlas
    from pos_geometry.errors import CheckpointFormatError, MissingTensorError, NotCachedError
    from pos_geometry.plotting import plot_atlas_heatmap, plot_atlas_short_share, plot_atlas_usage

    labels = [label for label in s.tables] if s.kind == "rotary, per layer type" else [""]
    atlases, verdicts, rows, values, figures, provenance = {}, [], [], {}, [], []
    for label in labels:
        try:
            atlas = rotary_atlas(
                s.model, revision=s.revision, layer_type=label or None, fold_norm=True, device=device
            )
        except (MissingTensorError, NotCachedError, CheckpointFormatError) as exc:
            return not_run(KEY, "not available", str(exc)), {}
        atlases[label] = atlas
        v, numbers = _type_verdicts(label, atlas)
        verdicts += v
        values[label or "all"] = numbers
        prefix = f"{label}: " if label else ""
        rows += [(prefix + k, val) for k, val in atlas.summary_rows()]
        stem = f"_{label}" if label else ""
        figures += [
            (f"rotary_heatmap{stem}", plot_atlas_heatmap(atlas),
             f"{prefix}each head's share of its QK form in each rotation plane (planes by wavelength)."),
            (f"rotary_usage{stem}", plot_atlas_usage(atlas),
             f"{prefix}mean share of the QK form by the plane's wavelength, per layer."),
            (f"rotary_short_share{stem}", plot_atlas_short_share(atlas),
             f"{prefix}share of each layer's QK form in the planes that turn within its span (short) and the rest (long)."),
        ]  # fmt: skip
        provenance.append(atlas.provenance)
    return ran(KEY, verdicts, rows, values, provenance, figures), atlases
