"""Shared look and labels of every figure: titles, colours, dash styles, deterministic ids.

A title always says what was plotted: the model and revision (a name, never a file path),
what kind of table an analytic one is, the position window, and the share of variance the
*plotted* components explain, e.g. ``"gpt2 @ main · rows 1–1023 · PC1–3: 91.1%"`` or
``"pythia-70m @ main (rotary table) · rows 0–2047 · PC1–3: 29.1%"``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from pos_geometry._escape import plotly_text
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = [
    "EXTRA_COLOR",
    "FIT_COLOR",
    "FONT",
    "KIND_DASH",
    "POSITION_BLUE",
    "POSITION_COLORSCALE",
    "TOKEN_RED",
    "base_layout",
    "components_label",
    "figure_id",
    "kind_note",
    "model_label",
    "title_for",
    "variance_label",
    "window_label",
]

POSITION_COLORSCALE = "Viridis"
"""Colour scale for position (dark = early, yellow = late)."""

POSITION_BLUE = "#1f5fbf"
TOKEN_RED = "#d62728"
FIT_COLOR = "#e4572e"
EXTRA_COLOR = "#111111"

KIND_DASH: dict[str, str] = {"learned": "solid", "rotary": "dash", "sinusoidal": "dot", "hidden": "dashdot"}
"""Line dash per embedding kind, so learned and rotary curves can share one chart."""

FONT = {"family": "Helvetica, Arial, sans-serif", "size": 13}


def model_label(prov: Provenance | None) -> str:
    """``"gpt2 @ main"`` (revision omitted when unknown); ``"array"`` for bare arrays. A local file
    loaded without a name is named by its file, never its path (:attr:`Provenance.name`). Escaped for a
    plotly label (:func:`~pos_geometry._escape.plotly_text`): a file named ``<a href=...>`` shows as written."""
    if prov is None:
        return "array"
    name = "array" if prov.model_id == "<array>" else prov.name
    return plotly_text(name if not prov.revision else f"{name} @ {prov.revision}")


def kind_note(prov: Provenance | None) -> str:
    """``" (rotary table)"`` for an analytic table whose name does not already say so, else ``""``:
    a rotary or sinusoidal table is shown as what it is, not as a learned matrix."""
    if prov is None or prov.kind not in ("rotary", "sinusoidal") or prov.kind in prov.name.lower():
        return ""
    return f" ({prov.kind} table)"


def window_label(window: tuple[int, int]) -> str:
    """Inclusive row range of a half-open window: ``(1, 1024)`` -> ``"rows 1–1023"``."""
    start, stop = (int(w) for w in window)
    return f"row {start}" if stop - start == 1 else f"rows {start}–{stop - 1}"


def components_label(components: Sequence[int]) -> str:
    """1-based component names: ``(0, 1, 2)`` -> ``"PC1–3"``, ``(0, 2)`` -> ``"PC1,3"``."""
    comps = [int(c) + 1 for c in components]
    if len(comps) == 1:
        return f"PC{comps[0]}"
    if comps == list(range(comps[0], comps[0] + len(comps))):
        return f"PC{comps[0]}–{comps[-1]}"
    return "PC" + ",".join(str(c) for c in comps)


def variance_label(ratios: Sequence[float] | np.ndarray, components: Sequence[int]) -> str:
    """``"PC1–3: 91.1%"``: the summed explained-variance ratio of exactly the plotted components."""
    r = np.asarray(ratios, dtype=np.float64)
    comps = [int(c) for c in components]
    bad = [c for c in comps if not 0 <= c < r.shape[-1]]
    if bad:
        raise InvalidArgumentError(
            f"components must index the {r.shape[-1]} fitted principal components (0-based); got {comps}. "
            f"Fit more components (n_components > {max(comps)}) or choose components < {r.shape[-1]}."
        )
    return f"{components_label(comps)}: {100.0 * float(r[comps].sum()):.1f}%"


def title_for(
    prov: Provenance | None,
    window: tuple[int, int] | None = None,
    ratios: Sequence[float] | np.ndarray | None = None,
    components: Sequence[int] | None = None,
    *,
    prefix: str | None = None,
) -> str:
    """Join model, window and variance into one title: ``"gpt2 @ main · rows 1–1023 · PC1–3: 91.1%"``."""
    parts = [prefix] if prefix else []
    parts.append(model_label(prov) + kind_note(prov))
    if window is not None:
        parts.append(window_label(window))
    if ratios is not None and components is not None:
        parts.append(variance_label(ratios, components))
    return " · ".join(parts)


def figure_id(fig: go.Figure, prefix: str = "pos-geometry") -> str:
    """A deterministic HTML id: a hash of the figure's JSON, so the same figure gets the same id."""
    digest = hashlib.sha256(fig.to_json().encode("utf-8")).hexdigest()[:16]
    return f"{prefix}-{digest}"


def base_layout(title: str, **extra: object) -> dict[str, object]:
    """The layout every figure starts from: white template, the title, our font."""
    layout: dict[str, object] = {
        "template": "plotly_white",
        "title": {"text": title, "x": 0.5, "xanchor": "center"},
        "font": FONT,
    }
    layout.update(extra)
    return layout
