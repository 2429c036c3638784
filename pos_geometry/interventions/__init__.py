"""Causal interventions on position: run a model with one positional edit and measure what it costs.

:func:`~pos_geometry.interventions.run.intervene` and
:func:`~pos_geometry.interventions.run.intervene_sweep` (also ``pg.intervene``, ``pg.intervene_sweep``)
measure the loss, by position, with bootstrap intervals, and attention by offset; the edits below
(:mod:`~pos_geometry.interventions.edits`) say what changes; :func:`parse_edits` reads the CLI's
``--edit`` specs. ``from pos_geometry.interventions import Rank, RemovePlanes``.
"""

from pos_geometry.interventions.edits import (
    Compose,
    Edit,
    Helix,
    Identity,
    MeanTable,
    Rank,
    Shift,
    ShuffleRows,
)
from pos_geometry.interventions.rotary_edits import RemovePlanes, RopeScaling, ScaleFrequencies, SwapPairing
from pos_geometry.interventions.specs import EDIT_SPECS, parse_edits

__all__ = [
    "Edit",
    "Identity",
    "Rank",
    "Helix",
    "ShuffleRows",
    "MeanTable",
    "Shift",
    "RemovePlanes",
    "ScaleFrequencies",
    "RopeScaling",
    "SwapPairing",
    "Compose",
    "EDIT_SPECS",
    "parse_edits",
]
