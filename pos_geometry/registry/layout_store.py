"""What a derived attention layout is, and its form on disk: transformers' modeling code is imported once
per architecture.

Deriving a layout (:func:`~pos_geometry.registry.derived_layout.derive_layout`) builds the model on the meta
device and runs a tiny probe through transformers' own modeling file. The answer depends only on the
config, on the installed transformers and on the derivation code itself, yet importing the modeling stack
costs seconds; a GGUF's atlas would pay that on every call. So each derived layout is stored as JSON under
``$POS_GEOMETRY_CACHE/layouts/transformers-<version>/<key>.json``, ``key`` a SHA-256 of the config (as
canonical JSON) and of the source of the modules that derive it, so a new transformers or a changed
derivation derives again (:mod:`pos_geometry._disk_memo`). A file that does not read back as a layout is
ignored and replaced; refusals are not stored (they are derived again, with their reason).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pos_geometry._disk_memo import memo_path, recall, remember
from pos_geometry.registry.attention import AttentionLayout
from pos_geometry.registry.latent_layout import LatentLayout

__all__ = ["DerivedLayout", "RotationGroup", "load_layout", "store_layout", "layout_path"]


@dataclass(frozen=True)
class RotationGroup:
    """Layers that rotate with the same frequencies: ``theta`` ``(n_planes,)`` float64, ``attention_factor``
    (transformers' cos/sin scale), and a ``label`` (the config's layer type, e.g. ``"sliding_attention"``)."""

    label: str
    layers: tuple[int, ...]
    theta: tuple[float, ...]
    attention_factor: float


@dataclass(frozen=True)
class DerivedLayout:
    """What transformers says about a config's attention: the :class:`AttentionLayout` (names, pairing,
    norms), the rotary dimension, the frequency groups, and the layers with no rotation at all."""

    layout: AttentionLayout
    rotary_dim: int
    head_dim: int
    groups: tuple[RotationGroup, ...]
    unrotated: tuple[int, ...]
    transformers_version: str

    def group_of(self, layer: int) -> RotationGroup | None:
        return next((g for g in self.groups if layer in g.layers), None)


KIND = "layouts"
_HERE = Path(__file__).resolve().parent
_DERIVATION = tuple(
    _HERE / name
    for name in ("derived_layout.py", "rotation_probe.py", "layout_check.py", "latent_layout.py", "attention.py",
                 "layout_store.py")
)  # fmt: skip
"""The modules whose code decides a derived layout (and its stored form): a change to any derives again."""


def layout_path(config_json: str) -> Path:
    """Where the layout derived from ``config_json`` (canonical JSON: sorted keys) is stored."""
    return memo_path(KIND, config_json, _DERIVATION)


def _from_answer(d: dict[str, Any]) -> DerivedLayout:
    layout = dict(d["layout"])
    latent = layout.pop("latent", None)
    groups = tuple(
        RotationGroup(str(g["label"]), tuple(int(i) for i in g["layers"]),
                      tuple(float(t) for t in g["theta"]), float(g["attention_factor"]))
        for g in d["groups"]
    )  # fmt: skip
    return DerivedLayout(
        layout=AttentionLayout(**layout, latent=None if latent is None else LatentLayout(**latent)),
        rotary_dim=int(d["rotary_dim"]),
        head_dim=int(d["head_dim"]),
        groups=groups,
        unrotated=tuple(int(i) for i in d["unrotated"]),
        transformers_version=str(d["transformers_version"]),
    )


def load_layout(config_json: str) -> DerivedLayout | None:
    """The stored :class:`~pos_geometry.registry.derived_layout.DerivedLayout` of ``config_json``, or None
    when none is stored (or the file does not read back as one: it is then derived and written again)."""
    answer = recall(KIND, config_json, _DERIVATION)
    if not isinstance(answer, dict):
        return None
    try:
        return _from_answer(answer)
    except (KeyError, TypeError, ValueError):  # damaged, or another form: derive again
        return None


def store_layout(config_json: str, derived: DerivedLayout) -> None:
    """Store ``derived`` for ``config_json`` (whole, or not at all)."""
    remember(KIND, config_json, _DERIVATION, json.loads(json.dumps(dataclasses.asdict(derived))))
