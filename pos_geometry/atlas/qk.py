"""The query/key atlas that applies to a model: rotary frequency planes, or the learned table's directions.

:func:`qk_atlas` is the one entry point the CLI and the reproduction call: a rotary model gets
:func:`~pos_geometry.atlas.rotary.rotary_atlas`, a learned-table model with a row in
``TABLE_QK_LAYOUTS`` (GPT-2) gets :func:`~pos_geometry.atlas.position_qk.position_qk_atlas`,
and anything else a :class:`~pos_geometry.errors.NotApplicableError` that says why.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pos_geometry._device import Device
from pos_geometry.errors import NotApplicableError

if TYPE_CHECKING:
    from pos_geometry.atlas.position_qk import PositionQKAtlas
    from pos_geometry.atlas.rotary import RotaryAtlas

__all__ = ["qk_atlas"]


def qk_atlas(
    name_or_path: str | os.PathLike[str],
    *,
    layers: Sequence[int] | int | None = None,
    revision: str | None = None,
    fold_norm: bool = False,
    n_components: int = 8,
    offline: bool | None = None,
    model_id: str | None = None,
    device: Device = "auto",
) -> RotaryAtlas | PositionQKAtlas:
    """The atlas of ``name_or_path``'s query/key weights: a :class:`RotaryAtlas` for a rotary model,
    a :class:`PositionQKAtlas` for a learned-table model with a QK layout row (GPT-2).

    ``fold_norm`` applies to rotary models (a learned-table view always applies the layer's
    LayerNorm); ``n_components`` to learned tables. Other arguments as in both functions.

    Raises:
        NotApplicableError: neither applies (ALiBi, relative biases, a learned table without a layout row).
    """
    from pos_geometry.atlas.position_qk import position_qk_atlas
    from pos_geometry.atlas.rotary import rotary_atlas
    from pos_geometry.registry.attention import table_qk_layout
    from pos_geometry.sources.opening import open_checkpoint

    common = {
        "layers": layers,
        "revision": revision,
        "offline": offline,
        "model_id": model_id,
        "device": device,
    }
    try:
        return rotary_atlas(name_or_path, fold_norm=fold_norm, **common)
    except NotApplicableError:
        config = open_checkpoint(name_or_path, revision=revision, offline=offline, model_id=model_id).config
        if table_qk_layout(config) is None:
            raise
    return position_qk_atlas(name_or_path, n_components=n_components, **common)
