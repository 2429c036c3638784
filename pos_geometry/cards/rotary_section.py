"""The card's rotary section: one :func:`~pos_geometry.rotary_atlas` per rotating layer type, in words.

The verdict compares the share of each head's QK form held by the planes that complete a cycle within the
layer's span (the short-wavelength planes) with the share those planes would hold if a head used every
plane alike (their count over the number of planes): above it, the heads lean on the fast planes; below,
on the slow, nearly position-blind ones.
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
    _, n_heads, n_planes = atlas.shape
    short = atlas.short_share
    uniform = float(atlas.layer_critical.sum(-1).double().mean()) / n_planes
    mean = float(short.mean())
    above = int((short > uniform).sum())
    where = f" ({label} layers)" if label else ""
    n_crit = int(atlas.critical.sum())
    flat = torch.argsort(short.flatten(), descending=True)[:N_LOCAL].tolist()
    local = [(atlas.layers[i // n_heads], i % n_heads, float(short.flatten()[i])) for i in flat]
    usage = atlas.layer_usage.mean(dim=0)
    top = torch.argsort(usage, descending=True)[:3].tolist()
    verdicts = [
        Verdict(
            f"rotary{where}: the {n_crit} of {n_planes} planes that turn at least once within the span carry "
            f"{mean:.2f} of the QK form (uniform use of the planes: {uniform:.2f}); {above} of {short.numel()} "
            f"heads lean on them more than uniform use would (range over the heads, not an interval: "
            f"{float(short.min()):.2f}–{float(short.max()):.2f})",
            null=f"uniform use of the planes ({uniform:.2f})",
            interval=(float(short.min()), float(short.max())),
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
        "layer_type": label or None, "short_share_mean": mean, "uniform_share": uniform, "heads_above_uniform": above,
        "n_heads": int(short.numel()), "critical_planes": n_crit, "n_planes": n_planes,
        "layer_short_share": atlas.layer_short_share, "most_local_heads": local, "most_used_planes": top,
        "wavelengths": atlas.wavelengths, "plane_usage": usage, "span": max(atlas.spans, default=atlas.context_length),
        "context_length": atlas.context_length,
    }  # fmt: skip
    return verdicts, values


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
