"""The reproduction's rotary section: the frequency atlas of each rotary model reachable here.

The rotary tables the report shows are textbook cos/sin tables, the same for every model of a
head size; how a rotary model *uses* position lives in its query/key weights. :func:`atlas_section`
computes :func:`~pos_geometry.atlas.rotary.rotary_atlas` for every rotary model it can
read without the network (a path given with ``--model``, else the pos_geometry and Hugging Face
caches; the hub only when ``online``) and returns its figures, in the ``{stem: (figure, caption)}``
form of :func:`~pos_geometry.reproduction.figures.blog_figures`, and a markdown block for the
report. A model it cannot reach is listed with the command that would fetch its q/k weights;
nothing is ever substituted for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pos_geometry._device import Device
from pos_geometry._escape import markdown_text
from pos_geometry.errors import NotCachedError
from pos_geometry.sources.locations import find_real_model

if TYPE_CHECKING:
    from pos_geometry.atlas.rotary import RotaryAtlas

__all__ = ["AtlasSection", "atlas_section", "atlas_fetch_command"]

DEFAULT_MODELS: tuple[str, ...] = ("pythia-160m", "mistral-7b-v0.1")
"""The rotary models of the reproduction (``runner.ROTARY_MODELS``)."""

REAL_MODEL = ("SmolLM2-135M-Instruct", "smollm2_135m_instruct_q4_1.gguf")
"""A real trained rotary model kept in ``../shared/data/real_models`` (GGUF, Q4_1): shown when present."""


def atlas_fetch_command(name: str) -> str:
    """The shell command that reads (and caches) ``name``'s query/key weights: only their bytes."""
    return f"pos-geometry atlas {name} --out atlas --online"


@dataclass(frozen=True)
class AtlasSection:
    """The rotary section of the report.

    Attributes:
        atlases: model name -> its :class:`RotaryAtlas`, for the models found.
        where: model name -> where its weights were read (or looked for).
        missing: model name -> the command that would fetch its q/k weights.
        figures: ``{stem: (plotly figure, caption)}``: per model a heatmap and usage curves.
        markdown: the section's text (heading, one paragraph per model, the missing ones).
    """

    atlases: Mapping[str, RotaryAtlas]
    where: Mapping[str, str]
    missing: Mapping[str, str]
    figures: Mapping[str, tuple[Any, str]] = field(default_factory=dict)
    markdown: str = ""


def _stem(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _paragraph(name: str, atlas: RotaryAtlas, where: str) -> str:
    n_layers, n_heads, n_planes = atlas.shape
    usage = atlas.layer_usage.mean(dim=0)
    top = int(usage.argmax())
    short = atlas.short_share
    return (
        f"**{name}** ({markdown_text(where)}): {n_layers} layers × {n_heads} heads × {n_planes} rotation planes "
        f"({atlas.pairing}); wavelengths {float(atlas.wavelengths.min()):.3g} to {float(atlas.wavelengths.max()):.4g} "
        f"positions, {int(atlas.critical.sum())} planes complete a cycle within the {atlas.context_length}-position "
        f"training context (critical dimension {atlas.critical_dimension}). Share of the heads' QK form in those "
        f"short-wavelength planes: mean {float(short.mean()):.3f} (heads from {float(short.min()):.3f} to "
        f"{float(short.max()):.3f}); the most used plane over all layers is plane {top} "
        f"(wavelength {float(atlas.wavelengths[top]):.4g}, mean share {float(usage[top]):.3f})."
    )


def _barbero(atlas: RotaryAtlas) -> str:
    """The real model against Barbero et al. (ICLR 2025, Gemma): measured here, said in words."""
    usage = atlas.layer_usage.mean(dim=0)
    n = usage.shape[0]
    k = max(1, n // 4)
    slow, fast = float(usage[-k:].sum()), float(usage[:k].sum())
    fastest = atlas.qk_share[..., : max(1, n // 8)].sum(-1)
    top = float(fastest.max())
    where = divmod(int(fastest.argmax()), atlas.shape[1])
    rising = bool((usage[1:] >= usage[:-1] - 0.002).float().mean() > 0.8)
    return (
        f"Against Barbero et al. (ICLR 2025), who found in Gemma that the low frequencies carry most of the QK form "
        f"and that a few heads use the highest ones: in this real model the {k} slowest planes hold {slow:.2f} of the "
        f"average head's form and the {k} fastest {fast:.2f} (uniform use would give {k / n:.2f} each); usage "
        f"{'rises steadily' if rising else 'does not rise steadily'} with wavelength, so the first half of their "
        f"finding holds here. The second does {'not ' if top < 0.5 else ''}hold: the head that leans most on the "
        f"{max(1, n // 8)} fastest planes (layer {atlas.layers[where[0]]}, head {where[1]}) puts {top:.2f} of its form "
        f"there (median head {float(fastest.median()):.2f})."
    )


def atlas_section(
    models: Sequence[str] = DEFAULT_MODELS,
    *,
    paths: Mapping[str, str | os.PathLike[str]] | None = None,
    online: bool = False,
    layers: Sequence[int] | int | None = None,
    device: Device = "cpu",
    real_model: bool = True,
) -> AtlasSection:
    """The frequency atlases of the rotary ``models`` this machine can read, as report figures and text.

    Args:
        models: model-table names of rotary models.
        paths: ``{model name: local model folder}`` read instead of the caches (``--model`` of the CLI).
        online: allow reading missing q/k weights from the hub (only their bytes).
        layers: layer indices for every model (default: all).
        device: where the atlas math runs (the CPU result is the reference).
        real_model: also show the real SmolLM2 GGUF of ``../shared/data/real_models`` when it is there.

    Returns:
        an :class:`AtlasSection`; models that cannot be read offline are in ``missing`` with the
        command that would fetch them. Other errors (a broken file, a model that is not rotary) propagate.
    """
    from pos_geometry.atlas.rotary import rotary_atlas
    from pos_geometry.plotting.atlas import plot_atlas_heatmap, plot_atlas_short_share, plot_atlas_usage

    atlases: dict[str, RotaryAtlas] = {}
    where: dict[str, str] = {}
    missing: dict[str, str] = {}
    for name in models:
        given = (paths or {}).get(name)
        try:
            if given is not None:
                atlases[name] = rotary_atlas(Path(given), layers=layers, model_id=name, device=device)
                where[name] = f"{given} (given with --model)"
            else:
                atlases[name] = rotary_atlas(name, layers=layers, offline=not online, device=device)
                prov = atlases[name].provenance
                where[name] = f"{prov.model_id}@{prov.commit} ({'hub' if online else 'local cache'})"
        except NotCachedError:
            where[name] = "q/k weights not in the pos_geometry or HF caches"
            missing[name] = atlas_fetch_command(name)
    real = find_real_model(REAL_MODEL[1]) if real_model else None
    if real is not None:
        atlases[REAL_MODEL[0]] = rotary_atlas(
            real, layers=layers, model_id=REAL_MODEL[0], fold_norm=True, device=device
        )
        where[REAL_MODEL[0]] = (
            f"{real.name}, ../shared/data/real_models (real trained weights, Q4_1, norm gains folded)"
        )
    figures: dict[str, tuple[Any, str]] = {}
    if real is not None:
        figures[f"atlas_short_{_stem(REAL_MODEL[0])}"] = (
            plot_atlas_short_share(atlases[REAL_MODEL[0]]),
            f"{REAL_MODEL[0]}: per layer, the share of the heads' QK form in planes that complete a cycle within "
            "the training context and in the slower ones; dots: each head.",
        )
    for name, atlas in atlases.items():
        figures[f"atlas_{_stem(name)}"] = (
            plot_atlas_heatmap(atlas),
            f"{name}: each head's share of its query/key form in each rotation plane, planes placed at their "
            f"wavelength; planes left of the dashed line complete a cycle within the {atlas.context_length}-position "
            "training context. Read from the q/k weights alone.",
        )
        figures[f"atlas_usage_{_stem(name)}"] = (
            plot_atlas_usage(atlas),
            f"{name}: per layer, the mean share of the heads' QK form by wavelength.",
        )
    lines = [
        "## How the rotary models use position: the frequency atlas",
        "",
        "The rotary tables above are the same for every model of a head size; what a model does with them is "
        "written in its query/key weights. Per layer, head and rotation plane: the plane's share of the head's "
        "QK bilinear form (Barbero et al. 2025; Chen et al. 2024's pair cosines are in the JSON), against the "
        "plane's wavelength and the training context (Liu et al. 2024's critical dimension).",
        "",
    ]
    lines += [_paragraph(name, atlas, where[name]) + "\n" for name, atlas in atlases.items()]
    if real is not None:
        lines += [_barbero(atlases[REAL_MODEL[0]]), ""]
    if missing:
        lines.append("Not available here (nothing is substituted):")
        lines += [
            f"- {name}: {markdown_text(where[name])}; fetch with `{cmd}`" for name, cmd in missing.items()
        ]
        lines.append("")
    return AtlasSection(
        atlases=atlases, where=where, missing=missing, figures=figures, markdown="\n".join(lines)
    )
